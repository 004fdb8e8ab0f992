package grouping

import "strings"

// Place returns where a failure happened, read from its traceback: the
// innermost frames of the application's own code, as module (or package)
// and function names, innermost first, joined by " < ", at most n of them.
// It returns "" when n <= 0 or when the traceback holds no frame it can
// read.
//
// Place is part of a failure's identity, so it leaves out everything that
// changes with a deploy or a build machine while the failure stays the
// same: line and column numbers, byte offsets (+0x1d), addresses and
// arguments, goroutine numbers, and absolute path prefixes. Moving the code
// by a few lines, building it in another folder or running it from
// another directory gives the same Place.
//
// It reads these formats, one traceback at a time: the first frame it
// recognises decides the format, and lines of the others are ignored.
//
//   - Python. With chained exceptions ("During handling of the above
//     exception..." or "The above exception was the direct cause...") only
//     the last block counts: it is the exception that was raised. A frame
//     is named module.function, the module being the file's last two path
//     components (shop/orders.py is shop.orders): how deep the package root
//     sits (/srv/app/ or /home/ci/build/) differs from machine to machine,
//     and the absolute path cannot tell where it starts. The directory is
//     dropped when it is a usual deploy root (app, src, srv, code, lib...),
//     so /app/orders.py and /srv/orders.py are both orders.
//   - Go, as printed by a panic, by runtime/debug.Stack, or one frame per
//     function line and a tab-indented file line (the worker's
//     WithTraceback, pkg/errors' %+v), "created by" lines included. A frame
//     is the last element of the import path plus the function:
//     payments.(*Client).Charge. Function names in Go tracebacks are import
//     paths, never file paths, so they do not depend on where the module
//     lives on disk (with -trimpath or without); the full import path
//     would only make Place longer. A major-version element (/v2) gives
//     way to the one before it. A recovered panic's stack is read from the
//     panic frame down: the frames above it are the recovery's, not the
//     failure's.
//   - Java and other JVM languages (at com.acme.shop.Orders.charge(...)),
//     and .NET frames of the same shape: package's last element, class,
//     method (shop.Orders.charge). Only the first block counts, the
//     exception thrown, not its "Caused by:" (the same choice as Python's
//     last block). Generated class suffixes ($$EnhancerBySpringCGLIB$$1f2e)
//     are cut; lambda frames, whose names hold an address, are skipped.
//   - Node.js (at chargeOrder (/app/src/orders.js:88:13)): module from the
//     path as for Python, then the function (orders.chargeOrder).
//   - Ruby (/app/app/jobs/charge_job.rb:88:in 'perform'): module from the
//     path, then the method; "block in" and the like are dropped.
//
// Which frames are the application's:
//
//   - The language runtime's own frames are never named: Go's runtime and
//     runtime/*, Python's <frozen ...>, Node's node: and internal/ modules,
//     Ruby's <internal:...>, the JVM's reflection frames.
//   - Library frames are left out unless nothing else is left: Python files
//     under site-packages/ or dist-packages/ and the standard library
//     (lib/python3.x/, a Windows Lib\); the Go standard library (an import
//     path whose first element has no dot, package main excepted) and
//     well-known third-party modules (github.com/lib/pq, golang.org/x/...,
//     goLibrary's list), and Redrive's own worker package (not its demo),
//     which calls every handler; JVM packages java., javax., sun., jdk.,
//     org.springframework. and the like, .NET's System. and Microsoft.
//     (javaClass's list); Node's
//     node_modules/; Ruby gems and its standard library. A relative
//     Python, Node or Ruby path (../lib/smtp.py) is taken as the
//     application's: interpreters print relative paths for the scripts
//     they were started with, their own files always have absolute ones.
//   - Go only, among what is left: the outermost frame is taken to be the
//     application's entry (what called it being a library's), and
//     only the frames of its module count, so a failure inside a
//     third-party module that no list knows is placed at the
//     application's call into it. A module is approximated by the import
//     path's first three elements on github.com-like hosts
//     (host/owner/repo) and its first two elsewhere (go.acme.dev/shop).
//     When the outermost frame is in package main, whose module the
//     traceback does not say, every non-library frame counts.
//   - With no application frame, Place names the innermost library
//     frames; with none of those either, it returns "".
//
// Consecutive frames with the same name count once, so the depth of a
// recursion does not change Place. Characters that cannot be part of a
// name (spaces, control characters) become '_', Ruby's "::" becomes a
// dot, and any other frame whose name holds a ':' is not a frame: the
// result never holds ":<digits>" or "line ".
//
// Place scans the lines once with the strings package, without regular
// expressions, and allocates only its result (unless the traceback has
// more than 48 frames or n is over 8). A JVM, Node or Ruby traceback is
// read only as far as its n-th application frame.
func Place(traceback string, n int) string {
	if n <= 0 || traceback == "" {
		return ""
	}
	var buf [48]frame
	return render(parseFrames(traceback, buf[:0], n), n)
}

// frameClass says whose code a frame runs.
type frameClass uint8

const (
	classApp     frameClass = iota // the application's own code
	classLib                       // a library's, the standard library included
	classRuntime                   // the language runtime's: never named
)

// frame is one parsed frame, its name rendered as mod.mid.fn (empty parts
// left out; in mod, path separators become dots). Every string is a
// substring of the traceback: nothing is allocated until the result.
type frame struct {
	mod, mid, fn string
	root         string // Go: the frame's module (approximated); "" for package main
	class        frameClass
	goFrame      bool
}

func (f *frame) sameName(g *frame) bool {
	return f.mod == g.mod && f.mid == g.mid && f.fn == g.fn
}

// The formats parseFrames tells apart: the first frame (or Python header)
// decides, and lines of the others are ignored from then on.
const (
	formatNone   = iota
	formatPython // File "...", line 88, in f; outermost first
	formatGo     // function line, then a tab-indented file line
	formatAt     // JVM, .NET and Node: at ...
	formatRuby   // path.rb:88:in 'label', and from ...
)

// parseFrames appends the traceback's frames to frames, innermost first.
// A JVM, Node or Ruby traceback is read only until it has shown n
// application frames: the innermost ones are all Place names (a Spring
// stack has a hundred frames below them). Go's and Python's are read
// whole: Go's outermost frame says which module is the application's, and
// Python prints the innermost frame last.
func parseFrames(s string, frames []frame, n int) []frame {
	p := frameParser{start: len(frames), n: n, apps: appCount{last: -1}}
	for len(s) > 0 && !p.done {
		var line string
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			line, s = s[:i], s[i+1:]
		} else {
			line, s = s, ""
		}
		line = strings.TrimRight(line, "\r")
		switch {
		case line == "":
		case line[0] == ' ' || line[0] == '\t':
			frames = p.indented(frames, trimIndent(line))
		default:
			frames = p.unindented(frames, line, s)
		}
	}
	if p.format == formatPython {
		// Python prints the outermost frame first.
		for i, j := p.start, len(frames)-1; i < j; i, j = i+1, j-1 {
			frames[i], frames[j] = frames[j], frames[i]
		}
	}
	return frames
}

// frameParser is what parseFrames knows between lines. Its methods take
// the frames read so far and return them, rather than keeping them: a
// slice stored through the parser's pointer would move Place's buffer to
// the heap.
type frameParser struct {
	start  int // where this traceback's frames start in frames
	n      int // the application frames wanted
	format int // the traceback's format, once a frame has decided it
	apps   appCount
	// done: the traceback has shown all parseFrames reads of it.
	done bool
}

// indented reads an indented line, t without its indentation: a Python,
// JVM, .NET, Node or Ruby frame, a JVM or Node cause, or the header of a
// Python traceback inside an exception group. (A switch on constant
// prefixes, not a table of them: comparing with a constant costs a few
// instructions, with a table's string a call, and Place reads every line.)
func (p *frameParser) indented(frames []frame, t string) []frame {
	switch {
	case strings.HasPrefix(t, `File "`):
		if f, ok := pythonFrame(t[len(`File "`):]); ok {
			return p.add(frames, f, formatPython)
		}
	case strings.HasPrefix(t, "at "):
		if f, ok := atFrame(t[len("at "):]); ok {
			return p.addInnermost(frames, f, formatAt)
		}
	case strings.HasPrefix(t, "from "):
		if f, ok := rubyFrame(t[len("from "):]); ok {
			return p.addInnermost(frames, f, formatRuby)
		}
	case strings.HasPrefix(t, "Caused by:"), strings.HasPrefix(t, "Suppressed:"), strings.HasPrefix(t, "[cause]:"):
		// The JVM's or Node's cause: not the exception thrown.
		p.endIf(formatAt)
	case strings.HasSuffix(t, pythonHeader):
		return p.restart(frames, formatPython)
	}
	return frames
}

// unindented reads a line that is not indented: a Go function line
// (followed by its file line, tab-indented, which starts rest), a Go
// goroutine header, a Python header, or a Ruby frame.
func (p *frameParser) unindented(frames []frame, line, rest string) []frame {
	switch {
	case strings.HasSuffix(line, pythonHeader):
		// Of chained exceptions, the last is the one raised.
		return p.restart(frames, formatPython)
	case p.format == formatPython:
		// The exception's message, or a chaining line between two
		// tracebacks.
	case strings.HasPrefix(line, "Caused by:"):
		p.endIf(formatAt)
	case strings.HasPrefix(line, "goroutine "):
		p.endIf(formatGo) // the next goroutine of a full dump
	default:
		if (p.format == formatNone || p.format == formatGo) && goFileLineFollows(rest) {
			if f, ok, panicked := goFrame(line); panicked {
				// What was above the panic is the recovery's code.
				return p.restart(frames, formatGo)
			} else if ok {
				return p.add(frames, f, formatGo)
			}
		}
		if f, ok := rubyFrame(line); ok {
			return p.addInnermost(frames, f, formatRuby)
		}
	}
	return frames
}

// goFileLineFollows reports whether the lines after a line start with a
// Go file line: tab-indented, and not a JVM's or Ruby's frame.
func goFileLineFollows(rest string) bool {
	return len(rest) > 0 && rest[0] == '\t' && !strings.HasPrefix(rest, "\tat ") && !strings.HasPrefix(rest, "\tfrom ")
}

// is reports whether a line of format f counts, deciding the format if
// nothing has yet.
func (p *frameParser) is(f int) bool {
	if p.format == formatNone {
		p.format = f
	}
	return p.format == f
}

// add appends a frame of format, if the traceback is in it.
func (p *frameParser) add(frames []frame, f frame, format int) []frame {
	if p.is(format) {
		frames = append(frames, f)
	}
	return frames
}

// addInnermost appends a frame of format, if the traceback is in it, for
// the formats that print the innermost frame first (the JVM's, .NET's,
// Node's, Ruby's): the traceback ends with its n-th application frame,
// the last that Place can name.
func (p *frameParser) addInnermost(frames []frame, f frame, format int) []frame {
	if p.is(format) {
		frames = append(frames, f)
		p.done = p.apps.enough(frames, p.n)
	}
	return frames
}

// restart drops the frames read so far, if the traceback is in format:
// what follows a Python header or a Go panic frame is the failure's.
func (p *frameParser) restart(frames []frame, format int) []frame {
	if p.is(format) {
		return frames[:p.start]
	}
	return frames
}

// endIf ends the traceback if it is in format, without deciding it: the
// lines that follow are another exception's or another goroutine's.
func (p *frameParser) endIf(format int) {
	if p.format == format {
		p.done = true
	}
}

const pythonHeader = "Traceback (most recent call last):"

// appCount counts the distinct application frames of an innermost-first
// traceback, as render will name them: consecutive ones with the same name
// count once.
type appCount struct {
	n, last int // how many; the index of the last one, or -1
}

// enough counts the frame just appended to frames, and reports whether
// there are n application frames now.
func (c *appCount) enough(frames []frame, n int) bool {
	k := len(frames) - 1
	if frames[k].class != classApp {
		return false
	}
	if c.last < 0 || !frames[c.last].sameName(&frames[k]) {
		c.n++
	}
	c.last = k
	return c.n >= n
}

// trimIndent drops leading spaces, tabs, and the '|' and '+' that indent
// the tracebacks inside a Python exception group.
func trimIndent(s string) string {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '|' || s[i] == '+') {
		i++
	}
	return s[i:]
}

// render picks the frames Place names and joins their names.
func render(frames []frame, n int) string {
	var pickBuf [8]int // indices: pointers into frames would move it to the heap
	picks, size := pickFrames(frames, n, pickBuf[:0])
	if len(picks) == 0 {
		return ""
	}
	var b strings.Builder
	b.Grow(size)
	for i, k := range picks {
		if i > 0 {
			b.WriteString(" < ")
		}
		writeFrame(&b, &frames[k])
	}
	return b.String()
}

// pickFrames appends to picks the indices of the frames Place names,
// innermost first, at most n, and returns them with the bytes their names
// take at most: the application's frames (of the Go module that is the
// application's, when the traceback says), or with none of those the
// libraries'. Consecutive frames with the same name count once.
func pickFrames(frames []frame, n int, picks []int) ([]int, int) {
	want, anchor := placedClass(frames)
	size := 0
	for i := range frames {
		f := &frames[i]
		if f.class != want || otherGoModule(f, anchor) {
			continue
		}
		if len(picks) > 0 && frames[picks[len(picks)-1]].sameName(f) {
			continue
		}
		picks = append(picks, i)
		size += len(" < ") + len(f.mod) + len(f.mid) + len(f.fn) + 2
		if len(picks) == n {
			break
		}
	}
	return picks, size
}

// placedClass returns the class of the frames Place names, the
// application's if there is any, and the Go module that is the
// application's: the outermost application frame's (see Place), "" for
// any.
func placedClass(frames []frame) (want frameClass, anchor string) {
	for i := len(frames) - 1; i >= 0; i-- {
		if frames[i].class == classApp {
			if frames[i].goFrame {
				anchor = frames[i].root
			}
			return classApp, anchor
		}
	}
	return classLib, ""
}

// otherGoModule reports a Go frame of a module other than anchor, the
// application's: a third-party module that no list knows.
func otherGoModule(f *frame, anchor string) bool {
	return anchor != "" && f.goFrame && f.root != "" && f.root != anchor
}

// writeFrame writes a frame's name, mod.mid.fn, leaving out empty parts.
func writeFrame(b *strings.Builder, f *frame) {
	dot := false
	for _, part := range [3]string{f.mod, f.mid, f.fn} {
		if part == "" {
			continue
		}
		if dot {
			b.WriteByte('.')
		}
		writeName(b, part)
		dot = true
	}
}

// writeName writes a name part: path separators and Ruby's "::" as dots,
// spaces and control characters as '_'.
func writeName(b *strings.Builder, s string) {
	run := 0 // s[run:i] is still to write as it is
	for i := 0; i < len(s); i++ {
		var to byte
		switch c := s[i]; {
		case c == '/' || c == '\\':
			to = '.'
		case c == ':':
			to = '.'
		case c <= ' ' || c == 0x7f:
			to = '_'
		default:
			continue
		}
		b.WriteString(s[run:i])
		b.WriteByte(to)
		if s[i] == ':' && i+1 < len(s) && s[i+1] == ':' {
			i++
		}
		run = i + 1
	}
	b.WriteString(s[run:])
}

// validName reports whether s can be a frame's name part: not empty and
// without ':' (which would be a line number's, or not a name at all).
func validName(s string) bool {
	return s != "" && strings.IndexByte(s, ':') < 0
}

// plainName reports whether s is a name without ':', spaces or tabs, as
// identifiers are.
func plainName(s string) bool {
	// Three vectorised scans beat one loop over the bytes.
	return s != "" && strings.IndexByte(s, ':') < 0 && strings.IndexByte(s, ' ') < 0 && strings.IndexByte(s, '\t') < 0
}

// pythonFrame reads the rest of a Python frame line after `File "`:
// `/app/shop/orders.py", line 88, in charge`.
func pythonFrame(s string) (frame, bool) {
	q := strings.Index(s, `", line `)
	if q < 0 {
		return frame{}, false
	}
	path, rest := s[:q], s[q+len(`", line `):]
	k := strings.Index(rest, ", in ")
	if k < 0 {
		return frame{}, false
	}
	fn := strings.TrimSpace(rest[k+len(", in "):])
	if !plainName(fn) {
		return frame{}, false
	}
	f := frame{fn: fn}
	if path == "" || path[0] == '<' { // <frozen runpy>, <string>
		f.class = classRuntime
		return f, true
	}
	i := afterDir(path, "site-packages")
	if i < 0 {
		i = afterDir(path, "dist-packages")
	}
	if i < 0 {
		i = pythonStdlib(path)
	}
	if i >= 0 {
		f.class, f.mod = classLib, libModule(path[i:])
	} else {
		f.mod = tailModule(path)
	}
	if f.mod != "" && !validName(f.mod) {
		return frame{}, false
	}
	return f, true
}

// pythonStdlib returns where the module path starts in a file of Python's
// standard library (.../lib/python3.11/json/decoder.py, C:\Python311\Lib\json\
// decoder.py), or -1.
func pythonStdlib(path string) int {
	if i := afterDir(path, "lib"); i >= 0 {
		rest := path[i:]
		if len(rest) > len("python") && strings.HasPrefix(rest, "python") && isDigit(rest[len("python")]) {
			if j := strings.IndexAny(rest, `/\`); j >= 0 {
				return i + j + 1
			}
		}
	}
	return afterDir(path, "Lib")
}

// afterDir returns the index just after the first path component named
// name and its separator, or -1.
func afterDir(path, name string) int {
	from := 0
	for {
		i := strings.Index(path[from:], name)
		if i < 0 {
			return -1
		}
		i += from
		end := i + len(name)
		if (i == 0 || isSep(path[i-1])) && end < len(path) && isSep(path[end]) {
			return end + 1
		}
		from = i + 1
	}
}

func isSep(c byte) bool   { return c == '/' || c == '\\' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// trimExt drops the file name's extension, if it has one.
func trimExt(p string) string {
	for i := len(p) - 1; i > 0 && !isSep(p[i]); i-- {
		if p[i] == '.' {
			return p[:i]
		}
	}
	return p
}

func lastSep(p string) int {
	for i := len(p) - 1; i >= 0; i-- {
		if isSep(p[i]) {
			return i
		}
	}
	return -1
}

// libModule is a library file's module, from the path under its root:
// requests/adapters.py is requests/adapters, json/__init__.py json.
func libModule(p string) string {
	p = trimExt(p)
	if i := lastSep(p); i >= 0 && p[i+1:] == "__init__" {
		p = p[:i]
	}
	return p
}

// tailModule is an application file's module: its last two path
// components without the extension (shop/orders), the directory dropped
// when it is a usual deploy root. A package's __init__ or a Node index
// file stands for its directory. Only two components, because absolute
// prefixes differ from machine to machine and the path does not say where
// the package root is.
func tailModule(p string) string {
	p = trimExt(p)
	if i := lastSep(p); i >= 0 && (p[i+1:] == "__init__" || p[i+1:] == "index") {
		p = p[:i]
	}
	file := lastSep(p) + 1
	if file == 0 {
		return p
	}
	dir := lastSep(p[:file-1]) + 1
	if deployRoot(p[dir : file-1]) {
		return p[file:]
	}
	return p[dir:]
}

// deployRoot reports whether a directory name is one that code is usually
// deployed or checked out under, rather than a package of the
// application's.
func deployRoot(d string) bool {
	switch d {
	case "", ".", "..", "~", "app", "apps", "src", "srv", "code", "lib", "build", "workspace", "work",
		"opt", "tmp", "home", "usr", "var", "root", "dist", "out":
		return true
	}
	return false
}

// goFrame reads a Go function line: "import/path.(*Type).Method(args)",
// "import/path.Func" or "created by import/path.Func in goroutine 7".
// panicked reports the runtime's panic frame.
func goFrame(line string) (f frame, ok, panicked bool) {
	name := stripArgs(goFuncName(line))
	if name == "panic" || name == "runtime.gopanic" {
		return f, false, true
	}
	path, fn, ok := splitGoFunc(name)
	if !ok {
		return f, false, false
	}
	f = frame{mod: goPackage(path), fn: fn, goFrame: true}
	f.class, f.root = goClass(path)
	return f, true, false
}

// goFuncName returns the function a Go function line names, with its
// arguments: a "created by" line's without its goroutine.
func goFuncName(line string) string {
	name, ok := strings.CutPrefix(line, "created by ")
	if !ok {
		return line
	}
	if i := strings.Index(name, " in goroutine "); i >= 0 {
		name = name[:i]
	}
	return name
}

// splitGoFunc splits a Go function's full name at the dot after its import
// path: payments.(*Client).Charge is the path payments and the function
// (*Client).Charge.
func splitGoFunc(name string) (path, fn string, ok bool) {
	if !plainName(name) {
		return "", "", false
	}
	slash := strings.LastIndexByte(name, '/')
	dot := strings.IndexByte(name[slash+1:], '.')
	if dot <= 0 {
		return "", "", false
	}
	dot += slash + 1
	path, fn = name[:dot], name[dot+1:]
	return path, fn, fn != ""
}

// goPackage names a Go frame's package by its import path's last element,
// or the one before a major version (/v2), which names nothing.
func goPackage(path string) string {
	slash := strings.LastIndexByte(path, '/')
	pkg := path[slash+1:]
	if slash > 0 && majorVersion(pkg) {
		prev := path[:slash]
		pkg = prev[strings.LastIndexByte(prev, '/')+1:]
	}
	return pkg
}

// goClass classifies a Go frame by its import path, and returns its module
// when it is the application's (see goModule): package main is the
// application's, of a module the traceback does not say; runtime and
// runtime/* are the runtime's; the standard library (no dot in the first
// element) and goLibrary's modules are libraries.
func goClass(path string) (frameClass, string) {
	host := path
	if i := strings.IndexByte(path, '/'); i >= 0 {
		host = path[:i]
	}
	switch {
	case path == "main":
		return classApp, ""
	case path == "runtime" || strings.HasPrefix(path, "runtime/"):
		return classRuntime, ""
	case strings.IndexByte(host, '.') < 0 || goLibrary(path, host):
		return classLib, ""
	}
	return classApp, goModule(path, host)
}

// stripArgs drops a Go function line's argument list, the last balanced
// parenthesis (the receiver's, as in (*Client), stays).
func stripArgs(s string) string {
	if !strings.HasSuffix(s, ")") {
		return s
	}
	depth := 0
	for i := len(s) - 1; i >= 0; i-- {
		switch s[i] {
		case ')':
			depth++
		case '(':
			depth--
			if depth == 0 {
				return s[:i]
			}
		}
	}
	return ""
}

// majorVersion reports whether an import path element is a major version
// suffix (v2, v10).
func majorVersion(e string) bool {
	if len(e) < 2 || e[0] != 'v' {
		return false
	}
	for i := 1; i < len(e); i++ {
		if !isDigit(e[i]) {
			return false
		}
	}
	return true
}

// goModule approximates the module an import path belongs to: its first
// three elements on hosts where a repository is host/owner/repo, its first
// two elsewhere (vanity paths such as go.uber.org/zap).
func goModule(path, host string) string {
	elems := 2
	switch host {
	case "github.com", "gitlab.com", "bitbucket.org", "codeberg.org", "golang.org", "git.sr.ht":
		elems = 3
	}
	for i := 0; i < len(path); i++ {
		if path[i] == '/' {
			elems--
			if elems == 0 {
				return path[:i]
			}
		}
	}
	return path
}

// goLibrary reports whether a Go import path (not the standard library's)
// belongs to a well-known third-party module, or is Redrive's worker
// package, which calls every handler: its frames are not the failing
// application's.
func goLibrary(path, host string) bool {
	switch host {
	case "golang.org", "google.golang.org", "cloud.google.com", "go.uber.org", "go.opentelemetry.io",
		"gorm.io", "gopkg.in", "k8s.io", "sigs.k8s.io", "go.etcd.io", "go.mongodb.org", "modernc.org":
		return true
	case "github.com":
	default:
		return false
	}
	owner, rest, _ := strings.Cut(path[len("github.com/"):], "/")
	repo, _, _ := strings.Cut(rest, "/")
	switch owner {
	case "jackc", "go-chi", "gin-gonic", "labstack", "gorilla", "gofiber", "valyala", "stretchr", "spf13",
		"aws", "grpc-ecosystem", "prometheus", "nats-io", "riverqueue", "redis", "go-redis", "go-sql-driver",
		"sirupsen", "segmentio", "golang", "google", "uptrace", "rs", "getsentry", "hashicorp", "urfave":
		return true
	case "lib":
		return repo == "pq"
	case "jmoiron":
		return repo == "sqlx"
	case "mattn":
		return repo == "go-sqlite3"
	case "pkg":
		return repo == "errors"
	case "julienschmidt":
		return repo == "httprouter"
	case "hibiken":
		return repo == "asynq"
	case "IBM", "Shopify":
		return repo == "sarama"
	case "a-h":
		return repo == "templ"
	case "cenkalti":
		return repo == "backoff"
	case "redrive":
		// Redrive's worker package only, not its demo: the demo's
		// handlers are the application.
		return rest == "redrive/worker"
	}
	return false
}

// atFrame reads a JVM, .NET or Node.js frame after its "at ".
func atFrame(s string) (frame, bool) {
	// JVM: name(File.java:88), no space before the parenthesis; .NET:
	// Name(int id) in /app/Orders.cs:line 88. Node always has a space
	// before its parenthesis, or no parenthesis.
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t':
			return nodeFrame(s)
		case '(':
			if i == 0 {
				return nodeFrame(s)
			}
			return javaFrame(s[:i])
		}
	}
	return nodeFrame(s)
}

// javaFrame reads a JVM frame's qualified method name,
// [loader/][module@version/]com.acme.shop.Orders.charge.
func javaFrame(name string) (frame, bool) {
	m, ok := scanJavaName(name)
	if !ok || m.dot < 0 || m.dot == len(name)-1 {
		return frame{}, false
	}
	if m.dd >= 0 && strings.HasPrefix(name[m.dd:], "$$Lambda") {
		return frame{}, false // a lambda's frame: the enclosing method has its own
	}
	class := name[m.start:m.dot]
	if m.dd >= 0 && m.dd < m.dot {
		class = name[m.start:m.dd] // Orders$$EnhancerBySpringCGLIB$$1f2e3d: generated per run
	}
	simple, mod := class, ""
	if i := strings.LastIndexByte(class, '.'); i >= 0 {
		simple, mod = class[i+1:], class[:i]
		mod = mod[strings.LastIndexByte(mod, '.')+1:]
	}
	if simple == "" {
		return frame{}, false
	}
	return frame{mod: mod, mid: simple, fn: name[m.dot+1:], class: javaClass(class)}, true
}

// javaMarks are where a JVM frame's name is cut, found in one pass.
type javaMarks struct {
	start int // after the class loader's and module's prefixes
	dot   int // the last dot, before the method; -1 if none
	dd    int // the first "$$", which starts a generated suffix; -1 if none
}

// scanJavaName finds javaMarks in a JVM frame's name. It reports false for
// a name that is not a frame's to name: one with a ':' or a blank, or a
// synthetic class's whose name holds an address
// (Orders$$Lambda/0x0000...).
func scanJavaName(name string) (javaMarks, bool) {
	m := javaMarks{dot: -1, dd: -1}
	for i := 0; i < len(name); i++ {
		switch name[i] {
		case '/':
			if m.dd >= 0 {
				return m, false
			}
			m.start, m.dot = i+1, -1
		case '.':
			m.dot = i
		case '$':
			if m.dd < 0 && i+1 < len(name) && name[i+1] == '$' {
				m.dd = i
			}
		case ':', ' ', '\t':
			return m, false
		}
	}
	return m, true
}

// javaClass classifies a JVM (or .NET) class by its package's first one or
// two elements: the platform's reflection frames are the runtime's, the
// platform's other packages and well-known libraries are libraries.
func javaClass(class string) frameClass {
	first, rest, _ := strings.Cut(class, ".")
	second, _, _ := strings.Cut(rest, ".")
	switch {
	case javaReflection(first, second, rest):
		return classRuntime
	case javaLibrary(first, second):
		return classLib
	}
	return classApp
}

// javaReflection reports the JVM's own packages whose frames only carry a
// call by reflection (jdk.internal., sun.reflect., java.lang.reflect.,
// java.lang.invoke.): the runtime's, never named.
func javaReflection(first, second, rest string) bool {
	switch first {
	case "jdk":
		return second == "internal"
	case "sun":
		return second == "reflect"
	case "java":
		return strings.HasPrefix(rest, "lang.reflect.") || strings.HasPrefix(rest, "lang.invoke.")
	}
	return false
}

// javaLibrary reports a package of the platform (the JVM's, Kotlin's,
// Scala's, .NET's System. and Microsoft.) or of a well-known library, by
// its first one or two elements.
func javaLibrary(first, second string) bool {
	switch first {
	case "jdk", "sun", "java", "javax", "jakarta", "kotlin", "kotlinx", "scala", "groovy", "reactor", "okhttp3",
		"okio", "feign", "retrofit2", "System", "Microsoft":
		return true
	case "org":
		switch second {
		case "springframework", "apache", "hibernate", "junit", "eclipse", "postgresql", "slf4j", "glassfish",
			"jboss", "aspectj", "mockito", "jetbrains":
			return true
		}
	case "com":
		switch second {
		case "sun", "google", "fasterxml", "zaxxer", "mysql", "amazonaws", "oracle":
			return true
		}
	case "io":
		switch second {
		case "netty", "grpc", "micrometer", "reactivex", "undertow", "vertx", "quarkus", "micronaut",
			"opentelemetry":
			return true
		}
	case "net":
		return second == "bytebuddy"
	case "software":
		return second == "amazon"
	}
	return false
}

// nodeFrame reads a Node.js frame after its "at ": "fn (/app/src/orders.js:88:13)",
// "/app/src/orders.js:88:13", "async fn (file:///app/x.mjs:3:9)".
func nodeFrame(s string) (frame, bool) {
	s = strings.TrimPrefix(s, "async ")
	name, loc := "", s
	if strings.HasSuffix(s, ")") {
		// The first " (": a name has none, a path may (Program Files (x86)).
		if i := strings.Index(s, " ("); i >= 0 {
			name, loc = s[:i], s[i+2:len(s)-1]
		}
	}
	name = strings.TrimPrefix(name, "new ")
	if i := strings.Index(name, " [as "); i >= 0 {
		name = name[:i]
	}
	if name == "" {
		name = "<anonymous>"
	}
	if !validName(name) {
		return frame{}, false
	}
	path, ok := stripLineNumbers(loc, 2)
	if !ok {
		// native, <anonymous>, index 0: the engine's own.
		return frame{fn: name, class: classRuntime}, true
	}
	if i := strings.Index(path, "://"); i >= 0 {
		path = path[i+len("://"):]
	}
	f := frame{mod: tailModule(path), fn: name}
	switch {
	case strings.HasPrefix(path, "node:") || strings.HasPrefix(path, "internal/") || lastSep(path) < 0:
		f.class = classRuntime // node:internal/..., and old Node's events.js
	case afterDir(path, "node_modules") >= 0:
		f.class = classLib
	}
	if !validName(f.mod) {
		return frame{}, false
	}
	return f, true
}

// stripLineNumbers drops up to max trailing ":<digits>" from loc; ok says
// there was at least one.
func stripLineNumbers(loc string, max int) (string, bool) {
	stripped := 0
	for stripped < max {
		i := len(loc)
		for i > 0 && isDigit(loc[i-1]) {
			i--
		}
		if i == len(loc) || i == 0 || loc[i-1] != ':' {
			break
		}
		loc = loc[:i-1]
		stripped++
	}
	return loc, stripped > 0
}

// rubyFrame reads a Ruby frame: "/app/app/jobs/charge_job.rb:88:in 'perform'"
// (Ruby 3.4: 'ChargeJob#perform'; before, `perform'), possibly followed by
// the message on the first line of an uncaught exception.
func rubyFrame(s string) (frame, bool) {
	path, label, ok := splitRubyFrame(s)
	if !ok {
		return frame{}, false
	}
	class, ok := rubyClass(path)
	if !ok {
		return frame{}, false
	}
	f := frame{fn: rubyLabel(label), class: class}
	if class != classRuntime {
		f.mod = tailModule(path)
	}
	// A label may name a namespace (Billing::ChargeJob#perform): its "::"
	// is written as a dot.
	if f.fn == "" || (f.mod != "" && !validName(f.mod)) {
		return frame{}, false
	}
	return f, true
}

// splitRubyFrame splits a Ruby frame into its file's path, without the
// line number, and its label, without the quotes.
func splitRubyFrame(s string) (path, label string, ok bool) {
	i := strings.Index(s, ":in ")
	if i < 0 {
		return "", "", false
	}
	path, ok = stripLineNumbers(s[:i], 1)
	label = s[i+len(":in "):]
	if !ok || path == "" || label == "" || (label[0] != '`' && label[0] != '\'') {
		return "", "", false
	}
	label = label[1:]
	j := strings.IndexByte(label, '\'')
	if j < 0 {
		return "", "", false
	}
	return path, label[:j], true
}

// rubyClass classifies a Ruby frame by its file: <internal:...> is the
// runtime's; gems and the standard library are libraries. A file that is
// not Ruby's (.rb) is not a frame.
func rubyClass(path string) (frameClass, bool) {
	switch {
	case strings.HasPrefix(path, "<internal:"):
		return classRuntime, true
	case !strings.HasSuffix(path, ".rb"):
		return classApp, false
	case afterDir(path, "gems") >= 0 || afterDir(path, "rubygems") >= 0 || strings.Contains(path, "/lib/ruby/"):
		return classLib, true
	}
	return classApp, true
}

// rubyLabel drops a Ruby frame label's "block in ", "block (2 levels) in ",
// "rescue in " and "ensure in ": the method is the place.
func rubyLabel(l string) string {
	for {
		switch {
		case strings.HasPrefix(l, "block in "):
			l = l[len("block in "):]
		case strings.HasPrefix(l, "rescue in "):
			l = l[len("rescue in "):]
		case strings.HasPrefix(l, "ensure in "):
			l = l[len("ensure in "):]
		case strings.HasPrefix(l, "block ("):
			i := strings.Index(l, ") in ")
			if i < 0 {
				return l
			}
			l = l[i+len(") in "):]
		default:
			if l == "<top (required)>" {
				return "<top>"
			}
			return l
		}
	}
}
