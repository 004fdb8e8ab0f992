-- Free-text search over the letters: the masked search text of each letter
-- in a side table with a trigram index, the queue of letters still to
-- index, and the mask policy the text is built under.

-- +goose Up

-- A trigram GIN index serves ILIKE '%term%' for any substring.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- Search matches only what the searcher may see: the search text is built
-- from masked values, with the same rules as the pages (package mask):
--
--   * a value under a key that contains one of the key patterns (any case,
--     any depth, inside arrays too) is replaced whole by "•••";
--   * in the error message, every string or number under such a key that
--     is at least 4 characters long is replaced by "•••" wherever it
--     appears, in every spelling a handler may have quoted it in;
--   * then every match of the extra patterns (REDRIVE_MASK_PATTERNS,
--     translated to PostgreSQL's regex syntax) is replaced too.
--
-- The patterns are process configuration of the console, but the letters
-- are indexed in whichever process runs the indexer. So the policy lives
-- here, in one row, which the console writes at start
-- (dlq.Store.ApplyMaskPolicy). Each search row records the policy version
-- it was built with; search reads only rows of the current version, so
-- after a change a row not yet rebuilt is missing from search results for
-- a while, never found by a value the new policy hides. The console then
-- rebuilds the stale rows in batches (`redrive search rebuild` does the
-- same by hand); dead-lettering goes on meanwhile. A change to the
-- functions below that changes what they hide bumps the version too.
CREATE TABLE mask_policy (
    id         boolean     PRIMARY KEY DEFAULT true CHECK (id),
    version    bigint      NOT NULL,
    -- Lower-case substrings of sensitive keys.
    keys       text[]      NOT NULL,
    -- Extra patterns, in PostgreSQL's syntax, and as the operator wrote
    -- them (Go's syntax), which is what the console compares.
    patterns   text[]      NOT NULL,
    written    text[]      NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
-- mask.DefaultKeys: letters indexed before any console started are
-- masked like the console's defaults.
INSERT INTO mask_policy (version, keys, patterns, written)
VALUES (1, ARRAY['password', 'secret', 'token', 'authorization', 'card', 'ssn'], '{}', '{}');

-- One row per indexed letter. A letter's message and arguments never
-- change once it is written (an edit-and-replay enqueues a new job and
-- leaves the letter as it was), so the text and its index live in a row of
-- their own that no replay or discard touches: in the letter's row, every
-- settling of a letter would add a trigram entry for ~3 kB of text, a few
-- hundred index insertions, about half of what a bulk replay cost. The list
-- asks for `id IN (SELECT dead_letter_id FROM dead_letter_search WHERE
-- search_text ILIKE ...)`, which the planner answers from the trigram index
-- and joins back by primary key.
--
-- No foreign key: ON DELETE CASCADE would delete row by row, and a purge of
-- a million letters is one statement; the delete trigger does it as one
-- set-based statement instead.
CREATE TABLE dead_letter_search (
    dead_letter_id bigint PRIMARY KEY,
    search_text    text   NOT NULL,
    policy_version bigint NOT NULL DEFAULT 0
);
CREATE INDEX dead_letter_search_text_idx ON dead_letter_search USING gin (search_text gin_trgm_ops);

-- The scalar values of each indexed letter's arguments, one row per leaf:
-- what a range on the arguments (kwargs.amount>999, args.0>="2026") is
-- looked up in. GIN cannot answer a range (jsonb_path_ops hashes each
-- value with its path), and without this the list walked the letters
-- newest first, checking each, until a page was full: 0.3-2.4 s on a
-- million letters for a rare range, the whole table for one that matched
-- nothing. The store probes these indexes for at most a few thousand ids
-- before it plans a read (letters.ArgProbe) and reads only those letters,
-- still checking the exact condition on each; a probe that finds more
-- walks as before. So this table may hold more than a letter's values
-- (a string's prefix, a key taken for a position) but never less.
--
-- path is the column and the steps to the value as the #> operator reads
-- them (an object's key, or an array's position in decimal), joined by
-- dots, a dot or backslash in a key escaped by a backslash:
-- kwargs.customer.id, args.1.sku, kwargs.tags.0. A number is kept as
-- numeric (what jsonb holds, so it compares exactly as the letter's
-- check does), a string as its first 64 characters in byte order
-- (COLLATE "C", as the check compares): a range on a longer string
-- narrows by prefix and the letter's check decides.
-- Booleans and nulls are not kept; no range asks for them. A letter with
-- more leaves than dead_letter_arg_leaves keeps has one row (path '',
-- str ''), which every probe takes as a candidate.
--
-- Filled where search rows are built (dead_letter_search_index), never by
-- the letters' insert trigger: dead-lettering writes nothing more. A
-- letter still queued for search has no rows yet, and the probe admits
-- every letter from the queue's smallest id. The letter's delete trigger
-- takes its rows, by the index on dead_letter_id (a purge deletes
-- batches of letters, which would otherwise scan the table each time).
-- No primary key: a row is never looked up alone.
CREATE TABLE dead_letter_arg_values (
    dead_letter_id bigint  NOT NULL,
    path           text    COLLATE "C" NOT NULL,
    num            numeric,
    str            text    COLLATE "C"
);
-- The letter's id is in both value indexes so that a probe reads them
-- alone (an index-only scan): a probe that reads its cap of 5,000 entries
-- and gives up took 23-50 ms fetching each entry's heap row, 1.5 ms
-- without. It costs the string index twice its size (its common values,
-- currency EUR say, are no longer one entry with a list of rows).
CREATE INDEX dead_letter_arg_values_num_idx ON dead_letter_arg_values (path, num, dead_letter_id) WHERE num IS NOT NULL;
CREATE INDEX dead_letter_arg_values_str_idx ON dead_letter_arg_values (path, str, dead_letter_id) WHERE str IS NOT NULL;
CREATE INDEX dead_letter_arg_values_letter_idx ON dead_letter_arg_values (dead_letter_id);

-- A letter's leaves as dead_letter_arg_values holds them, at most 256 (a
-- letter with more: the one row that makes it a candidate of every
-- probe), at most 8 steps deep (argquery's longest path). Measured: see
-- docs/performance.md, "Qualifiers on the arguments".
-- +goose StatementBegin
CREATE FUNCTION dead_letter_arg_leaves(args jsonb, kwargs jsonb)
RETURNS TABLE (path text, num numeric, str text) LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    WITH RECURSIVE walk (path, v, depth) AS (
        SELECT 'args', args, 0
        UNION ALL
        SELECT 'kwargs', kwargs, 0
        UNION ALL
        SELECT w.path || '.' || replace(replace(e.k, '\', '\\'), '.', '\.'), e.v, w.depth + 1
        FROM walk w, LATERAL (
            SELECT o.key, o.value FROM jsonb_each(CASE WHEN jsonb_typeof(w.v) = 'object' THEN w.v END) o
            UNION ALL
            SELECT (a.ord - 1)::text, a.value
            FROM jsonb_array_elements(CASE WHEN jsonb_typeof(w.v) = 'array' THEN w.v END) WITH ORDINALITY a (value, ord)
        ) e (k, v)
        WHERE w.depth < 8
    ), leaves AS (
        SELECT w.path, CASE WHEN jsonb_typeof(w.v) = 'number' THEN w.v::numeric END AS num,
            CASE WHEN jsonb_typeof(w.v) = 'string' THEN left(w.v #>> '{}', 64) END AS str
        FROM walk w WHERE w.depth > 0 AND jsonb_typeof(w.v) IN ('number', 'string')
        LIMIT 257
    )
    SELECT l.path, l.num, l.str FROM leaves l WHERE (SELECT count(*) FROM leaves) <= 256
    UNION ALL
    SELECT '', NULL, '' WHERE (SELECT count(*) FROM leaves) > 256
$$;
-- +goose StatementEnd

-- The letters still to index. A letter's search row is built after the
-- letter is written, not in the statement that writes it: built by the
-- insert trigger, the masked text and its trigram entries took 2.2 times as
-- long as the insert with all of the letter's indexes (EXPLAIN (ANALYZE,
-- WAL) of a batch of 2,000 seeded letters), and once the GIN pending list
-- is full the writer that filled it merges it, so a burst of failures, just
-- when an incident needs the worker to keep up, paid for the search index of
-- every letter. The letters' insert trigger queues the statement's new ids
-- here instead, and dead_letter_search_index builds their rows: the console
-- runs it in the background (dlq.Store.IndexSearch), `redrive search
-- rebuild` runs it to the end, and `redrive seed` after its inserts. A
-- letter is found by search a moment after it is written, and never by a
-- value the mask policy hides: it has no search row at all until one is
-- built under the policy.
--
-- One row per inserting statement, not per letter: the statement's new ids
-- as one sorted array (first_id, its smallest, is the key; n is its length,
-- read without detoasting the array). One row per letter was a heap row
-- and a btree entry written and deleted again a moment later: on a seed of
-- a million letters, about 180 MB of its 2.9 GB of WAL and 3% of its
-- server time.
CREATE TABLE dead_letter_search_queue (
    first_id bigint PRIMARY KEY,
    ids bigint[] NOT NULL,
    n integer NOT NULL,
    CONSTRAINT dead_letter_search_batches_check CHECK (n = cardinality(ids) AND n > 0)
);
-- A seed's arrays are 800 KB: lz4, where the server has it, packs and
-- unpacks them several times as fast as the default pglz.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
        ALTER TABLE dead_letter_search_queue ALTER COLUMN ids SET COMPRESSION lz4;
    END IF;
END
$$;
-- +goose StatementEnd

-- The runes of 128 and above that Go's strconv.Quote escapes (\u or \U),
-- as ranges [from, to), as of Go's Unicode 15.0.0: %q escapes the runes
-- Go's unicode tables call unprintable (strconv.IsPrint), which PostgreSQL
-- cannot tell. TestSQLKnowsGoUnprintableRunes fails when Go's tables
-- change; then a new migration redefines this function.
CREATE FUNCTION dead_letter_go_unprintable() RETURNS int4multirange
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN '{
    [128,161),[173,174),[888,890),[896,900),[907,908),[909,910),[930,931),[1328,1329),[1367,1369),[1419,1421),
    [1424,1425),[1480,1488),[1515,1519),[1525,1542),[1564,1565),[1757,1758),[1806,1808),[1867,1869),[1970,1984),
    [2043,2045),[2094,2096),[2111,2112),[2140,2142),[2143,2144),[2155,2160),[2191,2200),[2274,2275),[2436,2437),
    [2445,2447),[2449,2451),[2473,2474),[2481,2482),[2483,2486),[2490,2492),[2501,2503),[2505,2507),[2511,2519),
    [2520,2524),[2526,2527),[2532,2534),[2559,2561),[2564,2565),[2571,2575),[2577,2579),[2601,2602),[2609,2610),
    [2612,2613),[2615,2616),[2618,2620),[2621,2622),[2627,2631),[2633,2635),[2638,2641),[2642,2649),[2653,2654),
    [2655,2662),[2679,2689),[2692,2693),[2702,2703),[2706,2707),[2729,2730),[2737,2738),[2740,2741),[2746,2748),
    [2758,2759),[2762,2763),[2766,2768),[2769,2784),[2788,2790),[2802,2809),[2816,2817),[2820,2821),[2829,2831),
    [2833,2835),[2857,2858),[2865,2866),[2868,2869),[2874,2876),[2885,2887),[2889,2891),[2894,2901),[2904,2908),
    [2910,2911),[2916,2918),[2936,2946),[2948,2949),[2955,2958),[2961,2962),[2966,2969),[2971,2972),[2973,2974),
    [2976,2979),[2981,2984),[2987,2990),[3002,3006),[3011,3014),[3017,3018),[3022,3024),[3025,3031),[3032,3046),
    [3067,3072),[3085,3086),[3089,3090),[3113,3114),[3130,3132),[3141,3142),[3145,3146),[3150,3157),[3159,3160),
    [3163,3165),[3166,3168),[3172,3174),[3184,3191),[3213,3214),[3217,3218),[3241,3242),[3252,3253),[3258,3260),
    [3269,3270),[3273,3274),[3278,3285),[3287,3293),[3295,3296),[3300,3302),[3312,3313),[3316,3328),[3341,3342),
    [3345,3346),[3397,3398),[3401,3402),[3408,3412),[3428,3430),[3456,3457),[3460,3461),[3479,3482),[3506,3507),
    [3516,3517),[3518,3520),[3527,3530),[3531,3535),[3541,3542),[3543,3544),[3552,3558),[3568,3570),[3573,3585),
    [3643,3647),[3676,3713),[3715,3716),[3717,3718),[3723,3724),[3748,3749),[3750,3751),[3774,3776),[3781,3782),
    [3783,3784),[3791,3792),[3802,3804),[3808,3840),[3912,3913),[3949,3953),[3992,3993),[4029,4030),[4045,4046),
    [4059,4096),[4294,4295),[4296,4301),[4302,4304),[4681,4682),[4686,4688),[4695,4696),[4697,4698),[4702,4704),
    [4745,4746),[4750,4752),[4785,4786),[4790,4792),[4799,4800),[4801,4802),[4806,4808),[4823,4824),[4881,4882),
    [4886,4888),[4955,4957),[4989,4992),[5018,5024),[5110,5112),[5118,5120),[5760,5761),[5789,5792),[5881,5888),
    [5910,5919),[5943,5952),[5972,5984),[5997,5998),[6001,6002),[6004,6016),[6110,6112),[6122,6128),[6138,6144),
    [6158,6159),[6170,6176),[6265,6272),[6315,6320),[6390,6400),[6431,6432),[6444,6448),[6460,6464),[6465,6468),
    [6510,6512),[6517,6528),[6572,6576),[6602,6608),[6619,6622),[6684,6686),[6751,6752),[6781,6783),[6794,6800),
    [6810,6816),[6830,6832),[6863,6912),[6989,6992),[7039,7040),[7156,7164),[7224,7227),[7242,7245),[7305,7312),
    [7355,7357),[7368,7376),[7419,7424),[7958,7960),[7966,7968),[8006,8008),[8014,8016),[8024,8025),[8026,8027),
    [8028,8029),[8030,8031),[8062,8064),[8117,8118),[8133,8134),[8148,8150),[8156,8157),[8176,8178),[8181,8182),
    [8191,8208),[8232,8240),[8287,8304),[8306,8308),[8335,8336),[8349,8352),[8385,8400),[8433,8448),[8588,8592),
    [9255,9280),[9291,9312),[11124,11126),[11158,11159),[11508,11513),[11558,11559),[11560,11565),[11566,11568),
    [11624,11631),[11633,11647),[11671,11680),[11687,11688),[11695,11696),[11703,11704),[11711,11712),[11719,11720),
    [11727,11728),[11735,11736),[11743,11744),[11870,11904),[11930,11931),[12020,12032),[12246,12272),[12284,12289),
    [12352,12353),[12439,12441),[12544,12549),[12592,12593),[12687,12688),[12772,12784),[12831,12832),[42125,42128),
    [42183,42192),[42540,42560),[42744,42752),[42955,42960),[42962,42963),[42964,42965),[42970,42994),[43053,43056),
    [43066,43072),[43128,43136),[43206,43214),[43226,43232),[43348,43359),[43389,43392),[43470,43471),[43482,43486),
    [43519,43520),[43575,43584),[43598,43600),[43610,43612),[43715,43739),[43767,43777),[43783,43785),[43791,43793),
    [43799,43808),[43815,43816),[43823,43824),[43884,43888),[44014,44016),[44026,44032),[55204,55216),[55239,55243),
    [55292,63744),[64110,64112),[64218,64256),[64263,64275),[64280,64285),[64311,64312),[64317,64318),[64319,64320),
    [64322,64323),[64325,64326),[64451,64467),[64912,64914),[64968,64975),[64976,65008),[65050,65056),[65107,65108),
    [65127,65128),[65132,65136),[65141,65142),[65277,65281),[65471,65474),[65480,65482),[65488,65490),[65496,65498),
    [65501,65504),[65511,65512),[65519,65532),[65534,65536),[65548,65549),[65575,65576),[65595,65596),[65598,65599),
    [65614,65616),[65630,65664),[65787,65792),[65795,65799),[65844,65847),[65935,65936),[65949,65952),[65953,66000),
    [66046,66176),[66205,66208),[66257,66272),[66300,66304),[66340,66349),[66379,66384),[66427,66432),[66462,66463),
    [66500,66504),[66518,66560),[66718,66720),[66730,66736),[66772,66776),[66812,66816),[66856,66864),[66916,66927),
    [66939,66940),[66955,66956),[66963,66964),[66966,66967),[66978,66979),[66994,66995),[67002,67003),[67005,67072),
    [67383,67392),[67414,67424),[67432,67456),[67462,67463),[67505,67506),[67515,67584),[67590,67592),[67593,67594),
    [67638,67639),[67641,67644),[67645,67647),[67670,67671),[67743,67751),[67760,67808),[67827,67828),[67830,67835),
    [67868,67871),[67898,67903),[67904,67968),[68024,68028),[68048,68050),[68100,68101),[68103,68108),[68116,68117),
    [68120,68121),[68150,68152),[68155,68159),[68169,68176),[68185,68192),[68256,68288),[68327,68331),[68343,68352),
    [68406,68409),[68438,68440),[68467,68472),[68498,68505),[68509,68521),[68528,68608),[68681,68736),[68787,68800),
    [68851,68858),[68904,68912),[68922,69216),[69247,69248),[69290,69291),[69294,69296),[69298,69373),[69416,69424),
    [69466,69488),[69514,69552),[69580,69600),[69623,69632),[69710,69714),[69750,69759),[69821,69822),[69827,69840),
    [69865,69872),[69882,69888),[69941,69942),[69960,69968),[70007,70016),[70112,70113),[70133,70144),[70162,70163),
    [70210,70272),[70279,70280),[70281,70282),[70286,70287),[70302,70303),[70314,70320),[70379,70384),[70394,70400),
    [70404,70405),[70413,70415),[70417,70419),[70441,70442),[70449,70450),[70452,70453),[70458,70459),[70469,70471),
    [70473,70475),[70478,70480),[70481,70487),[70488,70493),[70500,70502),[70509,70512),[70517,70656),[70748,70749),
    [70754,70784),[70856,70864),[70874,71040),[71094,71096),[71134,71168),[71237,71248),[71258,71264),[71277,71296),
    [71354,71360),[71370,71424),[71451,71453),[71468,71472),[71495,71680),[71740,71840),[71923,71935),[71943,71945),
    [71946,71948),[71956,71957),[71959,71960),[71990,71991),[71993,71995),[72007,72016),[72026,72096),[72104,72106),
    [72152,72154),[72165,72192),[72264,72272),[72355,72368),[72441,72448),[72458,72704),[72713,72714),[72759,72760),
    [72774,72784),[72813,72816),[72848,72850),[72872,72873),[72887,72960),[72967,72968),[72970,72971),[73015,73018),
    [73019,73020),[73022,73023),[73032,73040),[73050,73056),[73062,73063),[73065,73066),[73103,73104),[73106,73107),
    [73113,73120),[73130,73440),[73465,73472),[73489,73490),[73531,73534),[73562,73648),[73649,73664),[73714,73727),
    [74650,74752),[74863,74864),[74869,74880),[75076,77712),[77811,77824),[78896,78912),[78934,82944),[83527,92160),
    [92729,92736),[92767,92768),[92778,92782),[92863,92864),[92874,92880),[92910,92912),[92918,92928),[92998,93008),
    [93018,93019),[93026,93027),[93048,93053),[93072,93760),[93851,93952),[94027,94031),[94088,94095),[94112,94176),
    [94181,94192),[94194,94208),[100344,100352),[101590,101632),[101641,110576),[110580,110581),[110588,110589),
    [110591,110592),[110883,110898),[110899,110928),[110931,110933),[110934,110948),[110952,110960),[111356,113664),
    [113771,113776),[113789,113792),[113801,113808),[113818,113820),[113824,118528),[118574,118576),[118599,118608),
    [118724,118784),[119030,119040),[119079,119081),[119155,119163),[119275,119296),[119366,119488),[119508,119520),
    [119540,119552),[119639,119648),[119673,119808),[119893,119894),[119965,119966),[119968,119970),[119971,119973),
    [119975,119977),[119981,119982),[119994,119995),[119996,119997),[120004,120005),[120070,120071),[120075,120077),
    [120085,120086),[120093,120094),[120122,120123),[120127,120128),[120133,120134),[120135,120138),[120145,120146),
    [120486,120488),[120780,120782),[121484,121499),[121504,121505),[121520,122624),[122655,122661),[122667,122880),
    [122887,122888),[122905,122907),[122914,122915),[122917,122918),[122923,122928),[122990,123023),[123024,123136),
    [123181,123184),[123198,123200),[123210,123214),[123216,123536),[123567,123584),[123642,123647),[123648,124112),
    [124154,124896),[124903,124904),[124908,124909),[124911,124912),[124927,124928),[125125,125127),[125143,125184),
    [125260,125264),[125274,125278),[125280,126065),[126133,126209),[126270,126464),[126468,126469),[126496,126497),
    [126499,126500),[126501,126503),[126504,126505),[126515,126516),[126520,126521),[126522,126523),[126524,126530),
    [126531,126535),[126536,126537),[126538,126539),[126540,126541),[126544,126545),[126547,126548),[126549,126551),
    [126552,126553),[126554,126555),[126556,126557),[126558,126559),[126560,126561),[126563,126564),[126565,126567),
    [126571,126572),[126579,126580),[126584,126585),[126589,126590),[126591,126592),[126602,126603),[126620,126625),
    [126628,126629),[126634,126635),[126652,126704),[126706,126976),[127020,127024),[127124,127136),[127151,127153),
    [127168,127169),[127184,127185),[127222,127232),[127406,127462),[127491,127504),[127548,127552),[127561,127568),
    [127570,127584),[127590,127744),[128728,128732),[128749,128752),[128765,128768),[128887,128891),[128986,128992),
    [129004,129008),[129009,129024),[129036,129040),[129096,129104),[129114,129120),[129160,129168),[129198,129200),
    [129202,129280),[129620,129632),[129646,129648),[129661,129664),[129673,129680),[129726,129727),[129734,129742),
    [129756,129760),[129769,129776),[129785,129792),[129939,129940),[129995,130032),[130042,131072),[173792,173824),
    [177978,177984),[178206,178208),[183970,183984),[191457,194560),[195102,196608),[201547,201552),[205744,917760),
    [918000,1114112)
}'::int4multirange;

-- A secret and the ways error text may write it escaped, the quotes around
-- each left out: mask's spellings, for the same secrets in the same cases:
-- as it is, as PostgreSQL prints it in JSON (a letter's arguments are
-- jsonb), as Go's json.Marshal does (which also escapes <, > and &, and
-- U+2028 and U+2029), with SetEscapeHTML(false), and as Go's %q does. A
-- spelling added in Go needs a migration here.
-- +goose StatementBegin
CREATE FUNCTION dead_letter_mask_spellings(s text) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    out text[] := ARRAY[s];
    pg text;
    go text;
    spelling text;
    q text := '';
    c text;
    cp int;
    unprintable int4multirange;
BEGIN
    -- Printable ASCII that no encoder escapes: most secrets.
    IF s ~ '^[ -~]*$' AND translate(s, E'"\\<>&', '') = s THEN
        RETURN out;
    END IF;
    -- PostgreSQL's JSON; Go's json.Encoder with SetEscapeHTML(false) is
    -- the same but for U+2028 and U+2029; json.Marshal also escapes <>&
    -- (none of which an escape writes, so replacing them is safe).
    pg := to_jsonb(s)::text;
    pg := substr(pg, 2, char_length(pg) - 2);
    go := replace(replace(pg, chr(8232), E'\\u2028'), chr(8233), E'\\u2029');
    IF pg <> s THEN
        out := out || pg;
    END IF;
    spelling := replace(replace(replace(go, '<', E'\\u003c'), '>', E'\\u003e'), '&', E'\\u0026');
    IF NOT spelling = ANY(out) THEN
        out := out || spelling;
    END IF;
    IF NOT go = ANY(out) THEN
        out := out || go;
    END IF;
    -- Go's strconv.Quote.
    FOREACH c IN ARRAY string_to_array(s, NULL) LOOP
        cp := ascii(c);
        IF c = '"' OR c = E'\\' THEN
            q := q || E'\\' || c;
        ELSIF cp BETWEEN 32 AND 126 THEN
            q := q || c;
        ELSIF cp < 128 THEN
            q := q || CASE cp WHEN 7 THEN E'\\a' WHEN 8 THEN E'\\b' WHEN 12 THEN E'\\f' WHEN 10 THEN E'\\n'
                WHEN 13 THEN E'\\r' WHEN 9 THEN E'\\t' WHEN 11 THEN E'\\v' ELSE E'\\x' || lpad(to_hex(cp), 2, '0') END;
        ELSE
            IF unprintable IS NULL THEN
                unprintable := dead_letter_go_unprintable();
            END IF;
            IF unprintable @> cp THEN
                q := q || CASE WHEN cp < 65536 THEN E'\\u' || lpad(to_hex(cp), 4, '0') ELSE E'\\U' || lpad(to_hex(cp), 8, '0') END;
            ELSE
                q := q || c;
            END IF;
        END IF;
    END LOOP;
    IF NOT q = ANY(out) THEN
        out := out || q;
    END IF;
    RETURN out;
END;
$$;
-- +goose StatementEnd

-- The search text of one letter under a policy, as package mask's
-- TextMask.Apply would show it.
--
-- Cost matters: this runs for every letter indexed. The quick test first:
-- a key pattern that appears nowhere in the printed arguments cannot be in
-- a key (patterns hold nothing jsonb escapes: dlq refuses such patterns), so
-- most letters cost a few strpos and no JSON walk. The walk, when a pattern
-- does appear, is plpgsql simple expressions over jsonb_path_query_array: no
-- query per letter (each costs tens of us), except a sort when a letter has
-- several sensitive values. Measured on 100,000 seeded letters (a quarter
-- with a sensitive key): 24 us a letter against 5 us for the unmasked text;
-- the trigram index entry the text then gets costs ~200 us. (A recursive
-- SQL function that rebuilt the jsonb cost 1.5 ms a letter.)
--
-- Masking the printed JSON: jsonb prints every pair as "key": value, the
-- same inside a document as alone, and a quote inside a string is
-- escaped, so replacing the text of each sensitive pair by "key": "•••"
-- replaces exactly that pair (and any other pair of the same key and
-- value, equally sensitive). Longest first, so a sensitive object is
-- replaced whole before the pairs inside it, and "pin": 12 before "pin": 1.
--
-- In the message, in the order TextMask.Apply does: every spelling of every
-- secret of 4 or more characters, longest first, then byte order; then,
-- in a text the worker cut short (ending in mask.TruncatedMark), the
-- longest start of a spelling that it ends in; then the extra patterns.
-- Replacements happen before the text is cut to 1,000 characters (so one
-- huge payload cannot bloat the index), so a secret straddling the cut
-- cannot leave its first half behind.
-- +goose StatementBegin
CREATE FUNCTION dead_letter_masked_search_text(msg text, args jsonb, kwargs jsonb, keys text[], patterns text[])
RETURNS text LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    a text := args::text;
    k text := kwargs::text;
    la text := lower(a);
    lk text := lower(k);
    hit boolean := false;
    key text;
    kv jsonb;
    kvs jsonb;
    leaves jsonb;
    j int;
    j2 int;
    v jsonb;
    n int;
    i int;
    pairs text[];
    masked text[];
    secrets text[] := '{}';
    spelled text[] := '{}';
    mark constant text := '… (truncated)';
    body text;
    longest int := 0;
    pattern text;
BEGIN
    FOREACH key IN ARRAY keys LOOP
        IF strpos(la, key) > 0 OR strpos(lk, key) > 0 THEN
            hit := true;
            EXIT;
        END IF;
    END LOOP;
    IF hit THEN
        FOR n IN 1..2 LOOP
            pairs := '{}';
            masked := '{}';
            kvs := jsonb_path_query_array(CASE n WHEN 1 THEN args ELSE kwargs END,
                'strict $.** ? (@.type() == "object").keyvalue()');
            FOR j IN 0..jsonb_array_length(kvs) - 1 LOOP
                kv := kvs -> j;
                FOREACH key IN ARRAY keys LOOP
                    IF strpos(lower(kv ->> 'key'), key) > 0 THEN
                        v := kv -> 'value';
                        pairs := pairs || (to_jsonb(kv ->> 'key')::text || ': ' || v::text);
                        masked := masked || (to_jsonb(kv ->> 'key')::text || ': "•••"');
                        IF jsonb_typeof(v) IN ('string', 'number') THEN
                            secrets := secrets || (v #>> '{}');
                        ELSIF jsonb_typeof(v) IN ('object', 'array') THEN
                            leaves := jsonb_path_query_array(v, 'strict $.** ? (@.type() == "string" || @.type() == "number")');
                            FOR j2 IN 0..jsonb_array_length(leaves) - 1 LOOP
                                secrets := secrets || (leaves ->> j2);
                            END LOOP;
                        END IF;
                        EXIT;
                    END IF;
                END LOOP;
            END LOOP;
            IF cardinality(pairs) > 1 THEN
                SELECT array_agg(p ORDER BY char_length(p) DESC), array_agg(r ORDER BY char_length(p) DESC)
                INTO pairs, masked FROM unnest(pairs, masked) t(p, r);
            END IF;
            FOR i IN 1..coalesce(cardinality(pairs), 0) LOOP
                IF n = 1 THEN
                    a := replace(a, pairs[i], masked[i]);
                ELSE
                    k := replace(k, pairs[i], masked[i]);
                END IF;
            END LOOP;
        END LOOP;
        -- The secrets of 4 or more characters, each in all its spellings.
        FOREACH key IN ARRAY secrets LOOP
            IF char_length(key) >= 4 THEN
                spelled := spelled || dead_letter_mask_spellings(key);
            END IF;
        END LOOP;
        IF cardinality(spelled) > 1 THEN
            spelled := ARRAY(SELECT DISTINCT ON (char_length(s), s COLLATE "C") s FROM unnest(spelled) s
                ORDER BY char_length(s) DESC, s COLLATE "C");
        END IF;
        FOREACH key IN ARRAY spelled LOOP
            msg := replace(msg, key, '•••');
        END LOOP;
        -- A cut text: the longest start of a spelling that it ends in. (Of
        -- two such starts the longer in characters is the longer in bytes,
        -- as TextMask counts: both end the same text.)
        IF right(msg, char_length(mark)) = mark AND cardinality(spelled) > 0 THEN
            body := left(msg, -char_length(mark));
            FOREACH key IN ARRAY spelled LOOP
                FOR j IN REVERSE char_length(key) - 1 .. longest + 1 LOOP
                    IF right(body, j) = left(key, j) THEN
                        longest := j;
                        EXIT;
                    END IF;
                END LOOP;
            END LOOP;
            IF longest > 0 THEN
                msg := left(body, -longest) || '•••' || mark;
            END IF;
        END IF;
    END IF;
    FOREACH pattern IN ARRAY patterns LOOP
        msg := regexp_replace(msg, pattern, '•••', 'g');
    END LOOP;
    RETURN left(msg, 1000) || ' ' || left(a, 1000) || ' ' || left(k, 1000);
END;
$$;
-- +goose StatementEnd

-- Builds the search rows of up to batch queued letters, oldest first, and
-- returns how many ids it took (fewer than batch: the queue is empty). It
-- takes queued arrays oldest first until it has batch ids, and splits the
-- array that would overflow, leaving its remainder queued under its own
-- first id.
--
-- SKIP LOCKED lets several indexers (two consoles, a seed) work at once
-- without waiting for each other. The queue's rows are locked one at a
-- time, through a cursor: a single SELECT ... LIMIT would lock every row it
-- might need, and with a seed's ten arrays of 100,000 ids one indexer would
-- hold them all while the other found nothing to do. The letters are
-- locked FOR KEY SHARE (in dead_letter_records: it cannot lock through the
-- view's outer join), which no replay or discard conflicts with but a purge
-- does: a purge that deletes a letter being indexed waits, and its delete
-- trigger then sees the new search row and deletes it too; a letter
-- already purged is simply skipped. ON CONFLICT: a letter that already has
-- a row gets it rebuilt. Its argument values (dead_letter_arg_values) are
-- written with it; the insert trigger queues a letter once, so they are
-- never written twice.
--
-- The policy is read once per call; a policy changed meanwhile leaves rows
-- stamped with the old version, which search skips and RebuildSearch
-- rebuilds.
-- +goose StatementBegin
CREATE FUNCTION dead_letter_search_index(batch integer) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    pol mask_policy;
    queued CURSOR FOR SELECT first_id, n FROM dead_letter_search_queue ORDER BY first_id FOR UPDATE SKIP LOCKED;
    entry_first bigint;
    entry_n integer;
    whole bigint[] := '{}';   -- first ids of the arrays taken whole
    split_first bigint;       -- first id of the array taken in part
    split_ids bigint[] := '{}';
    room integer := greatest(batch, 1);
    taken bigint;
BEGIN
    SELECT * INTO pol FROM mask_policy;
    OPEN queued;
    WHILE room > 0 LOOP
        FETCH queued INTO entry_first, entry_n;
        EXIT WHEN NOT FOUND;
        IF entry_n <= room THEN
            whole := whole || entry_first;
            room := room - entry_n;
        ELSE
            split_first := entry_first;
            SELECT ids[1:room] INTO split_ids FROM dead_letter_search_queue WHERE first_id = split_first;
            UPDATE dead_letter_search_queue
            SET first_id = ids[room + 1], ids = ids[room + 1:], n = n - room
            WHERE first_id = split_first;
            room := 0;
        END IF;
    END LOOP;
    CLOSE queued;
    WITH gone AS (
        DELETE FROM dead_letter_search_queue WHERE first_id = ANY (whole) RETURNING ids
    ), taken_ids AS (
        SELECT unnest(gone.ids) AS id FROM gone
        UNION ALL
        SELECT unnest(split_ids)
    ), letters AS (
        SELECT d.id, d.error_message, d.args, d.kwargs FROM dead_letter_records d
        WHERE d.id IN (SELECT id FROM taken_ids)
        FOR KEY SHARE OF d
    ), built AS (
        INSERT INTO dead_letter_search AS s (dead_letter_id, search_text, policy_version)
        SELECT id, dead_letter_masked_search_text(error_message, args, kwargs,
                coalesce(pol.keys, '{}'), coalesce(pol.patterns, '{}')),
            coalesce(pol.version, 0)
        FROM letters ORDER BY id
        ON CONFLICT (dead_letter_id) DO UPDATE SET search_text = EXCLUDED.search_text,
            policy_version = EXCLUDED.policy_version
        RETURNING 1
    ), leaves AS (
        INSERT INTO dead_letter_arg_values (dead_letter_id, path, num, str)
        SELECT d.id, v.path, v.num, v.str FROM letters d, dead_letter_arg_leaves(d.args, d.kwargs) v
        ORDER BY d.id
    )
    SELECT count(*) INTO taken FROM taken_ids;
    RETURN taken;
END;
$$;
-- +goose StatementEnd

-- A letter deleted takes its search row with it, in one set-based
-- statement.
-- +goose StatementBegin
CREATE FUNCTION dead_letter_search_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM dead_letter_search s USING old_rows o WHERE s.dead_letter_id = o.id;
    DELETE FROM dead_letter_arg_values v USING old_rows o WHERE v.dead_letter_id = o.id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- Letters are not edited today; should one ever be, its search text
-- follows. A row trigger limited to these columns never fires otherwise.
-- +goose StatementBegin
CREATE FUNCTION dead_letter_search_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    pol mask_policy;
BEGIN
    SELECT * INTO pol FROM mask_policy;
    UPDATE dead_letter_search
    SET search_text = dead_letter_masked_search_text(NEW.error_message, NEW.args, NEW.kwargs, coalesce(pol.keys, '{}'), coalesce(pol.patterns, '{}')),
        policy_version = coalesce(pol.version, 0)
    WHERE dead_letter_id = NEW.id;
    IF FOUND THEN
        DELETE FROM dead_letter_arg_values WHERE dead_letter_id = NEW.id;
        INSERT INTO dead_letter_arg_values (dead_letter_id, path, num, str)
        SELECT NEW.id, v.path, v.num, v.str FROM dead_letter_arg_leaves(NEW.args, NEW.kwargs) v;
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER dead_letter_search_delete AFTER DELETE ON dead_letter_records
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dead_letter_search_delete();
CREATE TRIGGER dead_letter_search_update AFTER UPDATE OF error_message, args, kwargs ON dead_letter_records
    FOR EACH ROW EXECUTE FUNCTION dead_letter_search_update();

-- +goose Down
DROP TRIGGER dead_letter_search_update ON dead_letter_records;
DROP TRIGGER dead_letter_search_delete ON dead_letter_records;
DROP FUNCTION dead_letter_search_update();
DROP FUNCTION dead_letter_search_delete();
DROP FUNCTION dead_letter_search_index(integer);
DROP FUNCTION dead_letter_masked_search_text(text, jsonb, jsonb, text[], text[]);
DROP FUNCTION dead_letter_mask_spellings(text);
DROP FUNCTION dead_letter_arg_leaves(jsonb, jsonb);
DROP TABLE dead_letter_arg_values;
DROP FUNCTION dead_letter_go_unprintable();
DROP TABLE dead_letter_search_queue;
DROP TABLE dead_letter_search;
DROP TABLE mask_policy;
DROP EXTENSION IF EXISTS pg_trgm;
