package grouping

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Wildcard stands for a variable part of a template.
const Wildcard = "<*>"

// A token is one word of a message as the miner compares it.
type token struct {
	text string
	// fixed tokens never become a variable: a quoted identifier (the
	// missing key of a KeyError, a constraint's name), a number that is a
	// code (a status, an errno, a signal). Two messages that differ in one
	// are two failures.
	fixed bool
	// data tokens were masked whole: their text is Wildcard.
	data bool
	// start and end bound the token's own words in the message
	// (msg[start:end]), which masking replaced: what a variable of a
	// template took (Template.Values). Offsets rather than a copy of the
	// text, so that folding a run of tokens into one costs nothing, and 16
	// bits (messages are cut at maxMessageBytes), so that a token is no
	// bigger than without them on the grouping path.
	start, end int16
}

// Token offsets are int16: a longer maxMessageBytes must not compile
// without widening them.
const _ = int16(maxMessageBytes)

// maxMessageBytes bounds what of a message decides its group: long messages
// often embed whole payloads after their first line and first few hundred
// bytes.
const maxMessageBytes = 500

// isDelimiter reports the bytes that separate tokens besides white space.
// They carry no meaning of their own for grouping, and splitting at them
// turns "host:port", "key=value" and "(a, b)" into their parts, so that a
// variable part never drags a constant one with it.
func isDelimiter(b byte) bool {
	switch b {
	case ' ', '\t', '\n', '\r', '\f', '\v',
		',', ';', '=', '(', ')', '[', ']', '{', '}', '<', '>', '"', '\'', '`', '|',
		0: // a NUL is junk in a message, and the separator of clusterID's words
		return true
	}
	return false
}

// endsURL reports the bytes that end a URL or a path in text.
func endsURL(b byte) bool {
	switch b {
	case ' ', '\t', '\n', '\r', '\f', '\v', '"', '\'', '`', '<', '>', ')', ']', '}', ',', ';', '|':
		return true
	}
	return false
}

// codeWords are words after which a number names a kind of failure rather
// than an occurrence: "status 502" and "status 429", "[Errno 111]" and
// "[Errno 110]", "signal 9", "exit code 137" are different failures.
var codeWords = map[string]bool{
	"status": true, "code": true, "errno": true, "error": true, "signal": true,
	"http": true, "sqlstate": true, "exit": true, "returned": true, "http/1.1": true,
}

// tokenize splits a message into tokens: its first line, at most
// maxMessageBytes, split at white space and delimiters. A token with a
// digit in it is data (an id, an amount, an address, a time) and becomes
// the wildcard at once, unless it is a code (codeWords) or the message's
// only token.
func tokenize(msg string) []token {
	msg = messageHead(msg)
	var toks []token
	var ctx wordContext
	for i := 0; i < len(msg); {
		if b := msg[i]; isDelimiter(b) {
			if isQuote(b) {
				ctx.quote = quoteAfter(msg, i, ctx.quote)
			}
			i++
			continue
		}
		j := wordEnd(msg, i)
		if isLocation(msg[i:j]) {
			// A path or a URL is one word, its query string included:
			// it is data (where, not what), and its '=' and '&' are its
			// own.
			j = locationEnd(msg, j)
			toks = append(toks, token{text: Wildcard, data: true, start: int16(i), end: int16(j)})
			ctx.prevWord, ctx.fieldName = "", false
			i = j
			continue
		}
		lo, hi := punctBounds(msg[i:j])
		if lo < hi {
			// classifyWord returns the token's parts, not a token:
			// a token returned and then appended was copied through
			// a stack slot whose 16-byte reads stalled on its narrow
			// writes, 3% of tokenize.
			text, fixed := classifyWord(msg, i+lo, i+hi, j, ctx)
			toks = append(toks, token{text: text, fixed: fixed, data: text == Wildcard, start: int16(i + lo), end: int16(i + hi)})
			ctx.prevWord = msg[i+lo : i+hi]
			ctx.fieldName = namedAsField(msg, j)
		}
		i = j
	}
	toks = maskDates(toks)
	toks = maskCodes(toks)
	toks = collapseWildcards(toks)
	if len(toks) == 1 {
		// A message of one word is that word ("sdpd"): it names the
		// failure, unless it is data.
		toks[0].fixed = toks[0].text != Wildcard
	}
	return toks
}

// messageHead returns what of a message decides its group: its first line,
// at most maxMessageBytes of it, cut before any trailing bytes of a
// character that the limit split.
func messageHead(msg string) string {
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if len(msg) > maxMessageBytes {
		msg = msg[:maxMessageBytes]
		for len(msg) > 0 && !utf8.ValidString(msg[len(msg)-1:]) && msg[len(msg)-1] >= 0x80 {
			msg = msg[:len(msg)-1]
		}
	}
	return msg
}

// wordContext is what the words before a word say about it.
type wordContext struct {
	// quote is the quote the word is inside, or 0.
	quote byte
	// prevWord is the word before, "" after a path or a URL.
	prevWord string
	// fieldName: the word before was written as a field's name
	// ("status: 200 len: 1893", "status=200").
	fieldName bool
}

// isQuote reports the delimiters that open and close a quoted value.
func isQuote(b byte) bool { return b == '"' || b == '\'' || b == '`' }

// quoteAfter returns the quote that is open after the quote at msg[i],
// given the one open before it.
func quoteAfter(msg string, i int, quote byte) byte {
	switch b := msg[i]; {
	case quote == b:
		return 0
	case quote == 0 && opensQuote(msg, i):
		return b
	}
	return quote
}

// wordEnd returns the end of the run of bytes that are not delimiters
// starting at msg[i].
func wordEnd(msg string, i int) int {
	for i < len(msg) && !isDelimiter(msg[i]) {
		i++
	}
	return i
}

// isLocation reports a word that starts a path or a URL.
func isLocation(w string) bool {
	return w[0] == '/' && len(w) > 1 || strings.Contains(w, "://")
}

// locationEnd returns the end of a path or a URL whose first word ends at
// msg[j]: it runs on through the delimiters a URL holds ('=', '(').
func locationEnd(msg string, j int) int {
	for j < len(msg) && !endsURL(msg[j]) {
		j++
	}
	return j
}

// classifyWord returns what the word msg[start:end], whose run of bytes
// ends at msg[next], stands as in a template: its text (Wildcard, the
// word with its data masked, or the word itself) and whether it is fixed.
// A word that is neither masked nor fixed may become a variable once
// enough messages differ there. The first case that applies decides.
func classifyWord(msg string, start, end, next int, ctx wordContext) (text string, fixed bool) {
	word := msg[start:end]
	switch {
	case isMasked(word):
		return Wildcard, false
	case isName(word):
	case hasDigit(word) || strings.IndexByte(word, '@') >= 0:
		if ctx.isCode(word) {
			return word, true
		}
		return maskData(word), false
	case isPrefixedID(word):
		return Wildcard, false
	case ctx.quote != 0 && isQuotedKey(word):
		return word, true
	case isDottedName(word):
		return Wildcard, false
	case isLiteralField(word):
		return word[:strings.LastIndexByte(word, ':')+1] + Wildcard, false
	case isSnakeCase(word):
		return word, true
	case namesField(msg, next):
		// A field's name ("user=root", "timeout=80") says what the
		// record holds: a message with another field, or one more, is
		// another message.
		return word, true
	}
	return word, false
}

// isCode reports whether a word with digits is a code that names the
// failure: a short number after a code word ("status 502", "[Errno 111]"),
// unless that word was written as a field's name, one field of a record
// among others ("status: 200 len: 1893").
func (ctx wordContext) isCode(word string) bool {
	return isNumber(word) && codeWords[strings.ToLower(ctx.prevWord)] && !ctx.fieldName
}

// isQuotedKey reports whether a word in quotes is a key, a constraint or
// a field: a name in the code, which names the failure. A dotted name in
// quotes is a host or a domain more often than a key
// ('hooks.example.com'): where, not what. A short capital code is a value
// ('TBD', 'USD').
func isQuotedKey(word string) bool {
	return isIdentifier(word) && strings.IndexByte(word, '.') < 0 && !isCapitalCode(word)
}

// isLiteralField reports a name and a literal joined by a colon
// ("overlap:false"): the name stays, the literal is the value.
func isLiteralField(word string) bool {
	return strings.IndexByte(word, ':') > 0 && isLiteral(word[strings.LastIndexByte(word, ':')+1:])
}

// namesField reports whether the word whose run of bytes ends at msg[next]
// is a field's name: an '=' follows it, and a value after that.
func namesField(msg string, next int) bool {
	if next+1 >= len(msg) || msg[next] != '=' {
		return false
	}
	switch v := msg[next+1]; v {
	case '"', '\'', '(', '[':
		return true
	default:
		return !isDelimiter(v)
	}
}

// namedAsField reports whether the word whose run of bytes ends at
// msg[next] is written as a field's name: followed by '=', or ending in
// ':'. A code word so written ("status: 200", "status=200") is one field
// of a record among others, measured per event: its number is a value
// like theirs, not the name of a failure as in "returned status 502".
func namedAsField(msg string, next int) bool {
	return next < len(msg) && msg[next] == '=' || strings.HasSuffix(msg[:next], ":")
}

// opensQuote reports whether the quote at msg[i] opens a quoted value: an
// apostrophe inside a word ("can't", "user's") does not.
func opensQuote(msg string, i int) bool {
	if msg[i] != '\'' || i == 0 {
		return true
	}
	r, _ := utf8.DecodeLastRuneInString(msg[:i])
	return !unicode.IsLetter(r)
}

// punctBounds returns the bounds of w without the punctuation that ends or
// starts a word in prose ("failed:", "refused.", "...") but keeps it
// inside ("a.b", "x::y"): the word is w[lo:hi].
func punctBounds(w string) (lo, hi int) {
	lo, hi = 0, len(w)
	for lo < hi && isProsePunct(w[lo]) {
		lo++
	}
	for lo < hi && isProsePunct(w[hi-1]) {
		hi--
	}
	for strings.HasSuffix(w[lo:hi], "…") {
		hi -= len("…")
	}
	return lo, hi
}

func isProsePunct(b byte) bool { return b == '.' || b == ':' || b == '!' || b == '?' }

func hasDigit(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			return true
		}
	}
	return false
}

// isNumber reports a short integer, perhaps signed: what codes look like.
func isNumber(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" || len(s) > 5 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isIdentifier reports a word made of letters, underscores, dots and
// dashes: a name in the code (a key, a constraint, a field), which names
// the failure.
func isIdentifier(s string) bool {
	for _, r := range s {
		if !unicode.IsLetter(r) && r != '_' && r != '.' && r != '-' {
			return false
		}
	}
	return true
}

// maskData replaces the parts of a word that hold digits with the
// wildcard, keeping its other parts: "id#12#34" keeps "id#",
// "AirPort_Brcm43xx::syncPowerState" keeps "syncPowerState".
// Parts are split at any byte but a letter, a digit, '_' and '-'; an
// address, a path or a URL with an id, or an e-mail, is the wildcard whole.
func maskData(w string) string {
	if isDataWhole(w) {
		return Wildcard
	}
	// What is left of a number with a sign or a unit of punctuation
	// ("+0.27", "~5", "#3") is the number.
	out := maskDigitParts(w)
	if !strings.ContainsFunc(out, unicode.IsLetter) {
		return Wildcard
	}
	return out
}

// isDataWhole reports a word with a digit that is data whatever names its
// other parts hold: an e-mail, a URL or a path, or a dotted word or one
// with two colons, which is an address, a number with a fraction, a
// version, a time, a host and port, a file and line
// ("payments-3.eu-west-1", "proxy.example.edu:5070", "QQ.10018",
// "07:07:00"). A name and a number ("onExtend:1514") keeps the name; a C++
// or Rust path ("Brcm43xx::syncPowerState") keeps its names.
func isDataWhole(w string) bool {
	if strings.IndexByte(w, '@') >= 0 || strings.Contains(w, "://") || strings.HasPrefix(w, "/") {
		return true
	}
	return !strings.Contains(w, "::") && (strings.IndexByte(w, '.') >= 0 || strings.Count(w, ":") >= 2)
}

// maskDigitParts writes w with each part that holds a digit as the
// wildcard, and its other parts and separators as they are.
func maskDigitParts(w string) string {
	var b strings.Builder
	lastWild := false
	for i := 0; i < len(w); {
		if j := wordPartEnd(w, i); j > i {
			digits := hasDigit(w[i:j])
			switch {
			case !digits:
				b.WriteString(w[i:j])
			case !lastWild:
				b.WriteString(Wildcard)
			}
			lastWild = digits
			i = j
			continue
		}
		// A run of separators between two wildcards, or after the
		// last, folds into them: "id#12#34" has one value, not two.
		k := i
		for k < len(w) && !isWordByte(w[k]) {
			k++
		}
		if !(lastWild && (k == len(w) || hasDigitPart(w[k:]))) {
			b.WriteString(w[i:k])
			lastWild = false
		}
		i = k
	}
	return b.String()
}

// wordPartEnd returns the end of the part of w that starts at w[i]: a run
// of the bytes isWordByte accepts.
func wordPartEnd(w string, i int) int {
	for i < len(w) && isWordByte(w[i]) {
		i++
	}
	return i
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c >= 0x80
}

// hasDigitPart reports whether s starts with a part holding a digit.
func hasDigitPart(s string) bool {
	return hasDigit(s[:wordPartEnd(s, 0)])
}

// isMasked reports a word that masking hid: Redrive's placeholder
// (mask.Placeholder, "•••") or a run of asterisks, the usual way a secret
// is starred out. What it hid was a value, so it is data whatever it was.
func isMasked(w string) bool {
	if w == "" || w[0] != '*' && !strings.HasPrefix(w, "•") {
		return false
	}
	if strings.Trim(w, "•") == "" {
		return true
	}
	return len(w) >= 3 && strings.Trim(w, "*") == ""
}

// isSnakeCase reports a lower-case word joined by underscores
// ("insufficient_funds", "do_not_honor", "orders_pkey"): a name in code, an
// enum value or an error code, which names the failure as a quoted key
// does. It never becomes a variable.
func isSnakeCase(w string) bool {
	u := strings.IndexByte(w, '_')
	if u <= 0 || u == len(w)-1 {
		return false
	}
	for i := 0; i < len(w); i++ {
		if c := w[i]; !(c >= 'a' && c <= 'z' || c == '_') {
			return false
		}
	}
	return true
}

// dateWords are the English names of weekdays and months, as timestamps
// print them ("Fri Jun 17 07:07:00 2005").
var dateWords = map[string]bool{
	"Mon": true, "Tue": true, "Wed": true, "Thu": true, "Fri": true, "Sat": true, "Sun": true,
	"Jan": true, "Feb": true, "Mar": true, "Apr": true, "May": true, "Jun": true,
	"Jul": true, "Aug": true, "Sep": true, "Oct": true, "Nov": true, "Dec": true,
}

// maskDates masks the weekday and month names of a timestamp: a date word
// next to data is part of a time, which is data.
func maskDates(toks []token) []token {
	for i := range toks {
		if !dateWords[toks[i].text] {
			continue
		}
		if i+1 < len(toks) && toks[i+1].data || i > 0 && toks[i-1].data ||
			i+2 < len(toks) && dateWords[toks[i+1].text] && toks[i+2].data {
			toks[i].text, toks[i].fixed, toks[i].data = Wildcard, false, true
		}
	}
	return toks
}

// collapseWildcards folds a run of data tokens into one: a variable can
// take several words ("10.11.21.122,10.11.10.1", a date and a time, "()"
// and "(host.example)"), and the number of them is no part of the failure.
// The token folded into spans the words of the whole run.
func collapseWildcards(toks []token) []token {
	n := 0
	for i := range toks {
		if toks[i].data && n > 0 && toks[n-1].data {
			toks[n-1].end = toks[i].end
			continue
		}
		// Tokens move only after a fold: most messages have none, and
		// a copy in place would cost a write barrier per token.
		if n != i {
			toks[n] = toks[i]
		}
		n++
	}
	return toks[:n]
}

// isName reports a word of letters ended by a digit or two, short: the
// name of a protocol, a device or a version ("SOCKS5", "ssh2", "eth1",
// "IPv6", "S3"), a word rather than data.
func isName(w string) bool {
	if len(w) > 10 {
		return false
	}
	i := 0
	for i < len(w) && (w[i] >= 'a' && w[i] <= 'z' || w[i] >= 'A' && w[i] <= 'Z') {
		i++
	}
	return i >= 2 && len(w)-i >= 1 && len(w)-i <= 2 && !strings.ContainsFunc(w[i:], func(r rune) bool { return r < '0' || r > '9' })
}

// CodeValue stands in a template for a short capital code that is the
// value of the noun before it ("currency XBT", "currency DOGE", "region
// EU"): such codes are values, as numbers are, but of a kind of their own,
// so they do not make the position a variable for any word ("client SPP"
// and "client WindowsUpdateAgent" stay two).
const CodeValue = "<CODE>"

// maskCodes replaces the short capital codes that follow a lower-case
// word with CodeValue.
func maskCodes(toks []token) []token {
	for i := 1; i < len(toks); i++ {
		t, prev := toks[i], toks[i-1]
		if !t.fixed && !t.data && isCapitalCode(t.text) && !prev.fixed && isLowerWord(prev.text) {
			toks[i].text = CodeValue
		}
	}
	return toks
}

// isCapitalCode reports a word of two to four capital letters.
func isCapitalCode(w string) bool {
	if len(w) < 2 || len(w) > 4 {
		return false
	}
	for i := 0; i < len(w); i++ {
		if w[i] < 'A' || w[i] > 'Z' {
			return false
		}
	}
	return true
}

// isLowerWord reports a word of three or more lower-case letters: a noun
// or a verb of prose.
func isLowerWord(w string) bool {
	if len(w) < 3 {
		return false
	}
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}

// isPrefixedID reports an id made of a short lower-case prefix and an
// underscore, then eight or more letters and digits that are not a word
// of code: "cus_kRglkgEDyJDKRw", "ord_XBBATYEZ", "charge-ord_XBBATYEZ"
// (Stripe's and many APIs' ids). Its random part may hold no digit.
func isPrefixedID(w string) bool {
	if i := strings.LastIndexByte(w, '-'); i >= 0 {
		w = w[i+1:]
	}
	u := strings.LastIndexByte(w, '_')
	if u < 2 || len(w)-u-1 < 8 {
		return false
	}
	for i := 0; i < u; i++ {
		if c := w[i]; !(c >= 'a' && c <= 'z' || c == '_') {
			return false
		}
	}
	return isRandomPart(w[u+1:])
}

// isRandomPart reports whether the letters and digits after an id's
// prefix are random rather than a word: they show a capital or a digit,
// or are hexadecimal through and through. One id in 2,600 of eight hex
// digits draws only the letters a-f ("req_beefcafe"), and no word of eight
// letters or more is made of them alone.
func isRandomPart(s string) bool {
	upper, hex := false, true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			upper = true
		case c >= 'a' && c <= 'z':
		default:
			return false
		}
		hex = hex && (c >= '0' && c <= '9' || c >= 'a' && c <= 'f')
	}
	return upper || hex
}

// isLiteral reports the words that are values of any type: true, false,
// null and their kin.
func isLiteral(w string) bool {
	switch w {
	case "true", "false", "True", "False", "TRUE", "FALSE", "null", "nil", "None", "NULL":
		return true
	}
	return false
}

// isDottedName reports a name of three or more dotted parts: a host, a
// package, a class path ("android.intent.action.TIME_TICK",
// "api.example.com"). It names where, or which thing, not what went
// wrong, and it varies as an id does.
func isDottedName(w string) bool {
	if strings.Count(w, ".") < 2 {
		return false
	}
	return w[0] != '.' && w[len(w)-1] != '.' && !strings.Contains(w, "..")
}
