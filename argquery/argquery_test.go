package argquery

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func key(k string) Step { return Step{Key: k} }
func pos(n int) Step    { return Step{Index: n, IsIndex: true} }

func kw(op Op, v Value, steps ...Step) Compare {
	return Compare{Path: Path{Column: Kwargs, Steps: steps}, Op: op, Value: v}
}

func bare(s string) Value   { return Value{Text: s} }
func quoted(s string) Value { return Value{Text: s, Quoted: true} }

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Node
	}{
		{"timeout", nil},
		{"connection not found", nil},
		{"kwargs.customer_id:cus_9", kw(Eq, bare("cus_9"), key("customer_id"))},
		{"kwargs.country=DE", kw(Eq, bare("DE"), key("country"))},
		{"kwargs.amount>100", kw(Gt, bare("100"), key("amount"))},
		{"kwargs.amount>=100.5", kw(Ge, bare("100.5"), key("amount"))},
		{"kwargs.amount<-3", kw(Lt, bare("-3"), key("amount"))},
		{"kwargs.amount<=1e3", kw(Le, bare("1e3"), key("amount"))},
		{"kwargs.currency!=eur", kw(Ne, bare("eur"), key("currency"))},
		{`kwargs.name:"Jane Doe"`, kw(Eq, quoted("Jane Doe"), key("name"))},
		{`kwargs.name:"say \"hi\" \\ (now)"`, kw(Eq, quoted(`say "hi" \ (now)`), key("name"))},
		{`kwargs.empty:""`, kw(Eq, quoted(""), key("empty"))},
		{`kwargs.day>="2026-01-01"`, kw(Ge, quoted("2026-01-01"), key("day"))},
		{"kwargs.url:https://x.test/a?b=c", kw(Eq, bare("https://x.test/a?b=c"), key("url"))},
		{"kwargs.customer.id:7", kw(Eq, bare("7"), key("customer"), key("id"))},
		{`kwargs."odd key".x:1`, kw(Eq, bare("1"), key("odd key"), key("x"))},
		{"kwargs.items[2].sku:A-1", kw(Eq, bare("A-1"), key("items"), pos(2), key("sku"))},
		{"args.0:42", Compare{Path: Path{Column: Args, Steps: []Step{{Key: "0", IsIndex: true}}}, Op: Eq, Value: bare("42")}},
		{"args[1].customer:cus_9", Compare{Path: Path{Column: Args, Steps: []Step{pos(1), key("customer")}}, Op: Eq, Value: bare("cus_9")}},
		{"kwargs.a:1 kwargs.b:2", And{Terms: []Node{kw(Eq, bare("1"), key("a")), kw(Eq, bare("2"), key("b"))}}},
		{"kwargs.a:1 AND kwargs.b:2", And{Terms: []Node{kw(Eq, bare("1"), key("a")), kw(Eq, bare("2"), key("b"))}}},
		{"kwargs.a:1 or kwargs.b:2 kwargs.c:3", Or{Terms: []Node{
			kw(Eq, bare("1"), key("a")),
			And{Terms: []Node{kw(Eq, bare("2"), key("b")), kw(Eq, bare("3"), key("c"))}},
		}}},
		{"not kwargs.a:1", Not{Term: kw(Eq, bare("1"), key("a"))}},
		{"(kwargs.a:1 or kwargs.a:2) NOT kwargs.b:x", And{Terms: []Node{
			Or{Terms: []Node{kw(Eq, bare("1"), key("a")), kw(Eq, bare("2"), key("a"))}},
			Not{Term: kw(Eq, bare("x"), key("b"))},
		}}},
		{`timeout "reset by peer" kwargs.a:1`, And{Terms: []Node{
			Text{Phrase: "timeout"}, Text{Phrase: "reset by peer"}, kw(Eq, bare("1"), key("a")),
		}}},
	} {
		got, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Parse(%q)\n got %#v\nwant %#v", tc.in, got, tc.want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ in, says string }{
		{"kwargs.a:", "the value is missing"},
		{"kwargs.:1", "name a key after the dot"},
		{"kwargs.user_id mentioned", "compare with a value"},
		{"kwargs.a 1 kwargs.b:2", "compare with a value"},
		{"args.customer:1", "args are positional"},
		{"args[x]:1", "a position is a whole number"},
		{"args[-1]:1", "a position is a whole number"},
		{`kwargs.a:"open`, "never closed"},
		{`kwargs.a:x"y"`, "quote a value whole"},
		{"kwargs.amount>abc", "compares numbers"},
		{"(kwargs.a:1", "never closed"},
		{"kwargs.a:1)", "closes no ("},
		{"kwargs.a:1 or", "a term is missing"},
		{"or kwargs.a:1", `"or" needs a term on each side`},
		{"kwargs.a:1 ab", `"ab": search text needs at least 3`},
		{"not not not not not not not not not kwargs.a:1", "nested more than"},
		{strings.Repeat("kwargs.a:1 ", MaxTerms+1), "at most 16 terms"},
		{"kwargs.a.b.c.d.e.f.g.h.i:1", "at most 8 keys"},
	} {
		_, err := Parse(tc.in)
		var perr *Error
		if !errors.As(err, &perr) || !strings.Contains(perr.Msg, tc.says) {
			t.Errorf("Parse(%q) = %v, want an *Error saying %q", tc.in, err, tc.says)
		}
	}
}

func TestCandidates(t *testing.T) {
	for _, tc := range []struct {
		v    Value
		want []string
	}{
		{bare("cus_9"), []string{`"cus_9"`}},
		{bare("42"), []string{`42`, `"42"`}},
		{bare("true"), []string{`true`, `"true"`}},
		{bare("null"), []string{`null`, `"null"`}},
		{quoted("42"), []string{`"42"`}},
		{bare("0x10"), []string{`"0x10"`}},
		{bare("1e999"), []string{`1e999`, `"1e999"`}},
	} {
		if got := tc.v.Candidates(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%+v.Candidates() = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestPathString(t *testing.T) {
	for in, want := range map[string]string{
		"kwargs.customer.id:1":   "kwargs.customer.id",
		"args[0]:1":              "args[0]",
		"args.0:1":               "args.0",
		`kwargs."odd key"[3]:1`:  `kwargs."odd key"[3]`,
		"kwargs.items[2].sku:a1": "kwargs.items[2].sku",
	} {
		n, err := Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := n.(Compare).Path.String(); got != want {
			t.Errorf("%q: path %q, want %q", in, got, want)
		}
	}
}

// FuzzParse: any text is either plain (nil), a tree, or an *Error with a
// message; never a panic, and a tree's qualifiers always name a column.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"kwargs.a:1", `args[0]:"x" or not (kwargs.b>2 "reset by")`, "((", `kwargs."`, "args.", "kwargs.a:\"\\", "not"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(s)
		if err != nil {
			var perr *Error
			if !errors.As(err, &perr) || perr.Msg == "" || perr.Pos < 1 {
				t.Fatalf("Parse(%q): %v is not a located *Error", s, err)
			}
			return
		}
		for _, c := range Qualifiers(n) {
			if (c.Path.Column != Args && c.Path.Column != Kwargs) || len(c.Path.Steps) == 0 || c.Op == "" {
				t.Fatalf("Parse(%q): malformed qualifier %+v", s, c)
			}
		}
	})
}
