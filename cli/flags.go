package cli

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/notify"
	"github.com/redrive/redrive/web/auth"
	"github.com/redrive/redrive/worker"
)

// option is one flag of the binary: its name, the environment variable that
// sets it (empty: none), its default and its help. The help output and the
// README's configuration table both come from options.
type option struct {
	Name string
	Env  string
	// Default is the flag's default, and its type the flag's: string, bool,
	// int, float64 or time.Duration.
	Default any
	Help    string
}

// options is every flag of every command. A command takes the ones it
// names (register); adding a flag is one line here and one where the
// command reads it.
var options = []option{
	// Every command that opens the database.
	{"database-url", "DATABASE_URL", "", "Postgres connection URL"},
	{"log-level", "REDRIVE_LOG_LEVEL", "info", "debug, info, warn or error"},
	{"log-format", "REDRIVE_LOG_FORMAT", "text", "text or json"},
	{"migrate-database-url", "REDRIVE_MIGRATE_DATABASE_URL", "", "a direct connection to Postgres for migrations, when DATABASE_URL goes through a transaction pooler"},
	// The console (serve, dev).
	{"addr", "REDRIVE_ADDR", ":8080", "address to listen on"},
	{"migrate", "REDRIVE_MIGRATE", false, "apply pending migrations before serving"},
	{"logs-url-template", "REDRIVE_LOGS_URL_TEMPLATE", "", "link each attempt to your logs or traces: {job_id}, {task}, {from}, {to} are filled in"},
	{"session-keys", "REDRIVE_SESSION_KEYS", "", "comma-separated hex keys that sign session cookies; the first signs, all verify; make one with `openssl rand -hex 32` (required by serve)"},
	{"session-lifetime", "REDRIVE_SESSION_LIFETIME", auth.DefaultSessionLifetime, "a session ends this long after sign-in"},
	{"session-idle", "REDRIVE_SESSION_IDLE", auth.DefaultSessionIdle, "a session ends after this long without a request"},
	{"trusted-proxies", "REDRIVE_TRUSTED_PROXIES", "", "CIDRs of reverse proxies whose X-Forwarded-* and auth header are believed"},
	{"auth-header", "REDRIVE_AUTH_HEADER", "", "header in which a trusted proxy names the signed-in user, e.g. X-Forwarded-Email (empty: no SSO)"},
	{"proxy-roles", "REDRIVE_PROXY_ROLES", "", "roles of SSO users: alice@x.com=admin,bob@x.com=operator"},
	{"proxy-default-role", "REDRIVE_PROXY_DEFAULT_ROLE", string(dlq.RoleViewer), "role of SSO users not in --proxy-roles"},
	{"metrics-token", "REDRIVE_METRICS_TOKEN", "", "when set, /metrics requires Authorization: Bearer with this value"},
	{"mask-keys", "REDRIVE_MASK_KEYS", strings.Join(mask.DefaultKeys, ","), "argument keys whose values are hidden: comma-separated, case-insensitive substrings"},
	{"mask-patterns", "REDRIVE_MASK_PATTERNS", "", "regular expressions (Go syntax, one per line) also hidden in error messages and tracebacks, e.g. card numbers or tokens"},
	{"notify-webhook-urls", "REDRIVE_NOTIFY_WEBHOOK_URLS", "", "webhooks told about new and spiking error groups and bulk operations that end, comma-separated; prefix slack: for a Slack-style body"},
	{"notify-new-group-window", "REDRIVE_NOTIFY_NEW_GROUP_WINDOW", notify.DefaultNewGroupWindow, "a webhook is told about new error groups at most once in this long: those found within it in one message when it ends"},
	{"notify-new-group-gather", "REDRIVE_NOTIFY_NEW_GROUP_GATHER", notify.DefaultNewGroupGather, "the first new error group of a burst waits this long for the others (an outage's groups in several tasks) before they are announced in one message"},
	{"public-url", "REDRIVE_PUBLIC_URL", "", "the console's address as the team opens it, for the links in notifications (default: http://ADDR)"},
	{"read-database-url", "REDRIVE_READ_DATABASE_URL", "", "a streaming replica for the console's lists, search, groups, overview and exports (default: everything reads the primary)"},
	{"read-max-lag", "REDRIVE_READ_MAX_LAG", 30 * time.Second, "read the primary instead while the replica is further behind than this, or down"},
	{"sources", "REDRIVE_SOURCES", "", "other systems whose letters the console takes in, as NAME=KIND, comma-separated; KIND http: they POST them to /api/v1/letters, and NAME=http:https://... names the endpoint their replays are posted to; river: the console imports the jobs River discarded, from its own database or NAME=river:postgres://...; celery: a Celery app with redrive-celery, whose workers send its letters and take its replays (redrive, the console's own queue, is always one)"},
	{"retain-letters", "REDRIVE_RETAIN_LETTERS", time.Duration(0), "delete replayed and discarded letters settled longer ago than this, at the top of every hour, as `redrive purge --older-than` does (a group still growing is held for an operator to confirm on the overview); 0: kept until `redrive purge`"},
	{"replay-secrets", "REDRIVE_REPLAY_SECRETS", "", "the keys that sign the replays posted to HTTP sources' replay endpoints, as NAME=SECRET, comma-separated: one per source with an endpoint, at least 32 bytes (make one with `openssl rand -hex 32`)"},
	// The worker (worker, dev).
	{"queues", "REDRIVE_QUEUES", dlq.DefaultQueue, "comma-separated queues to work"},
	{"concurrency", "REDRIVE_CONCURRENCY", worker.DefaultConcurrency, "jobs run at once"},
	{"demo-tasks", "REDRIVE_DEMO_TASKS", false, "register the demo tasks: demo.* and the shop tasks redrive seed writes letters of"},
	{"shutdown-grace", "REDRIVE_SHUTDOWN_GRACE", 30 * time.Second, "on SIGTERM, how long in-flight jobs may finish before they are cancelled and handed back"},
	{"lease", "REDRIVE_LEASE", 30 * time.Second, "how long a claimed job is held without a heartbeat before another worker may take it"},
	{"job-timeout", "REDRIVE_JOB_TIMEOUT", 5 * time.Minute, "longest one attempt may run: the limit of jobs whose task and enqueue set none, and a cap on those that set a longer one"},
	{"retry-base", "REDRIVE_RETRY_BASE", worker.DefaultRetryBase, "backoff before the first retry; doubles each attempt"},
	{"retry-cap", "REDRIVE_RETRY_CAP", worker.DefaultRetryCap, "longest backoff between attempts"},
	{"metrics-addr", "REDRIVE_METRICS_ADDR", "", "serve the worker's Prometheus metrics on this address, e.g. :9090 (empty: off)"},
	{"retain-succeeded", "REDRIVE_RETAIN_SUCCEEDED", worker.DefaultRetainSucceeded, "how long succeeded jobs are kept before the cleaner deletes them; negative: for ever"},
	{"listen-database-url", "REDRIVE_LISTEN_DATABASE_URL", "", "a direct connection to Postgres for LISTEN, when DATABASE_URL goes through a transaction pooler (default: DATABASE_URL unless it is pooled, else polling only)"},
	// dev.
	{"data-dir", "REDRIVE_DATA_DIR", ".redrive", "where the private Postgres cluster keeps its data"},
	{"demo-rate", "", 5.0, "demo jobs enqueued per second"},
	{"reset", "", false, "remove the private Postgres cluster (wherever it lives), the sign-in and the log of --data-dir, then exit; refused while that cluster runs"},
	// enqueue.
	{"task", "", "", "task name (required)"},
	{"queue", "", dlq.DefaultQueue, "queue"},
	{"args", "", "[]", "positional arguments, a JSON array"},
	{"kwargs", "", "{}", "keyword arguments, a JSON object"},
	{"key", "", "", "the producer's idempotency key"},
	{"max-attempts", "", dlq.DefaultMaxAttempts, "attempts before the job is dead-lettered"},
	{"timeout", "", time.Duration(0), "limit on one attempt of this job, instead of its task's (0: the task's; a worker's --job-timeout still caps it)"},
	// seed.
	{"dead-letters", "", 0, "how many dead letters to insert (required)"},
	{"index-search", "", false, "build the letters' search rows before returning, rather than leave them to a console or `redrive search rebuild`"},
	{"ending-ago", "", time.Duration(0), "the letters failed in the 14 days before this long ago, not before now: with 2h, no group is still growing, so a retention purge holds none (make bench SCALE=...)"},
	// user and token.
	{"role", "", "", "viewer, operator or admin"},
	{"user", "", "", "the user the token acts as (create)"},
	{"name", "", "", "a label to recognise the token by (create; default: user and time)"},
	{"send-letters-of", "", "", "limit the token to sending the letters of these sources, comma-separated, and nothing else (create; POST /api/v1/letters)"},
	// audit.
	{"expect-head", "", "", "a head recorded earlier, ID:HASH (or a bare ID): the trail must still hold it"},
	// purge.
	{"older-than", "", "", "letters' retention age, e.g. 30d, 12w or 720h"},
	{"processed-events-older-than", "", "", "processed event ids' retention age, e.g. 90d"},
	{"actor", "", "cli", "who is purging, for the audit trail"},
	// search.
	{"batch", "", dlq.DefaultRebuildBatch, "search rows rebuilt per statement"},
}

// Groups of options that several commands take.
var (
	databaseOptions = []string{"database-url", "log-level", "log-format"}
	consoleOptions  = []string{"logs-url-template", "addr", "session-keys", "session-lifetime", "session-idle", "trusted-proxies",
		"auth-header", "proxy-roles", "proxy-default-role", "metrics-token", "mask-keys", "mask-patterns",
		"notify-webhook-urls", "notify-new-group-window", "notify-new-group-gather", "public-url", "read-database-url", "read-max-lag", "sources",
		"replay-secrets", "retain-letters"}
	workerOptions = []string{"queues", "concurrency", "demo-tasks", "shutdown-grace", "lease", "job-timeout", "retry-base",
		"metrics-addr", "retry-cap", "retain-succeeded", "listen-database-url"}
)

func lookupOption(name string) option {
	for _, o := range options {
		if o.Name == name {
			return o
		}
	}
	panic(fmt.Sprintf("cli: no option %q in the table", name)) // a programming error
}

// help is an option's help text as -h shows it.
func (o option) help() string {
	if o.Env == "" {
		return o.Help
	}
	return o.Help + " (env " + o.Env + ")"
}

// register adds the named options to fs, with their defaults and help.
func register(fs *flag.FlagSet, names ...[]string) {
	for _, group := range names {
		for _, name := range group {
			o := lookupOption(name)
			switch d := o.Default.(type) {
			case string:
				fs.String(o.Name, d, o.help())
			case bool:
				fs.Bool(o.Name, d, o.help())
			case int:
				fs.Int(o.Name, d, o.help())
			case float64:
				fs.Float64(o.Name, d, o.help())
			case time.Duration:
				fs.Duration(o.Name, d, o.help())
			default:
				panic(fmt.Sprintf("cli: option %q has a default of type %T", o.Name, o.Default))
			}
		}
	}
}

// flags reads the parsed values of a command's options by name.
type flags struct{ fs *flag.FlagSet }

func (f flags) get(name string) any {
	fl := f.fs.Lookup(name)
	if fl == nil {
		panic(fmt.Sprintf("cli: %s has no flag --%s", f.fs.Name(), name)) // a programming error
	}
	return fl.Value.(flag.Getter).Get()
}

func (f flags) str(name string) string             { return f.get(name).(string) }
func (f flags) boolean(name string) bool           { return f.get(name).(bool) }
func (f flags) integer(name string) int            { return f.get(name).(int) }
func (f flags) float(name string) float64          { return f.get(name).(float64) }
func (f flags) duration(name string) time.Duration { return f.get(name).(time.Duration) }

// parse applies the environment, then the flags, and refuses stray
// arguments. A variable sets its flag before the command line is parsed, so
// flags win over the environment and a malformed value is reported like a
// malformed flag.
func parse(fs *flag.FlagSet, args []string, getenv func(string) string) (flags, error) {
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := lookupOption(f.Name).Env
		if name == "" || envErr != nil {
			return
		}
		if v := getenv(name); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("%s=%q: %w", name, v, err)
			}
		}
	})
	if envErr != nil {
		return flags{}, envErr
	}
	if err := fs.Parse(args); err != nil {
		return flags{}, err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return flags{}, usagef("unexpected argument %q", fs.Arg(0))
	}
	return flags{fs}, nil
}

// setDefaults changes flag defaults for one command (shown in its -h too).
func setDefaults(fs *flag.FlagSet, defaults map[string]string) {
	for name, v := range defaults {
		if err := fs.Set(name, v); err != nil {
			panic(fmt.Sprintf("bad default for -%s: %v", name, err)) // a programming error
		}
		fs.Lookup(name).DefValue = v
	}
}

// configurationTable is the README's table of environment variables: every
// option that has one, its flag, default and help.
func configurationTable() string {
	var b strings.Builder
	b.WriteString("| variable | flag | default | meaning |\n|---|---|---|---|\n")
	for _, o := range options {
		if o.Env == "" {
			continue
		}
		def := fmt.Sprint(o.Default)
		if d, ok := o.Default.(time.Duration); ok {
			def = d.String()
		}
		if def == "" {
			def = "(none)"
		} else {
			def = "`" + def + "`"
		}
		fmt.Fprintf(&b, "| `%s` | `--%s` | %s | %s |\n", o.Env, o.Name, def, strings.ReplaceAll(o.Help, "|", "\\|"))
	}
	return b.String()
}
