package grouping

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// demoOutage is the demo's payments outage as a task's letter tells it:
// the message names the task, the job and the request.
func demoOutage(task, path string, job int, req string) string {
	return fmt.Sprintf("%s for job %d: payments-provider returned 503 Service Unavailable for POST %s (request_id req_%s): "+
		"upstream connect error or disconnect/reset before headers", task, job, path, req)
}

func TestSameFailure(t *testing.T) {
	msg := func(task, class, message string) Template { return MessageTemplate(task, class, message) }
	learned := func(task, class string, tokens ...string) Template {
		return Template{Task: task, Class: class, Tokens: tokens, Fixed: make([]bool, len(tokens))}
	}
	for _, c := range []struct {
		name string
		a, b Template
		same bool
	}{
		{"OneOutageInTwoTasksThatNameThemselves",
			msg("payments.charge", "ServiceUnavailable", demoOutage("payments.charge", "/v1/payment_intents", 17, "3dz6vxs7")),
			msg("payments.refund", "ServiceUnavailable", demoOutage("payments.refund", "/v1/refunds", 4242, "33707b4c")), true},
		{"SameClassAnotherMessage",
			msg("a.task", "HTTPError", "503 Server Error: Service Unavailable for url: https://api.example.com/v1/charges"),
			msg("b.task", "HTTPError", "404 Client Error: Not Found for url: https://api.example.com/v1/charges"), false},
		{"SameMessageAnotherClass",
			msg("a.task", "TimeoutError", "upstream timed out after 30s"),
			msg("b.task", "ReadTimeout", "upstream timed out after 30s"), false},
		{"AnotherMissingKey",
			msg("a.task", "KeyError", "'sku'"), msg("b.task", "KeyError", "'quantity'"), false},
		{"TheSameMissingKey",
			msg("a.task", "KeyError", "'sku'"), msg("b.task", "KeyError", "'sku'"), true},
		{"AVariableOnOneSideTakesAWord",
			learned("a.task", "StockError", "out", "of", "stock", "in", "warehouse", Wildcard),
			msg("b.task", "StockError", "out of stock in warehouse berlin"), true},
		{"AVariableNeverTakesAFixedWord",
			learned("a.task", "IntegrityError", "duplicate", "key", "violates", "unique", "constraint", Wildcard),
			msg("b.task", "IntegrityError", `duplicate key violates unique constraint "orders_pkey"`), false},
		{"AnotherLength",
			msg("a.task", "OSError", "disk full"), msg("b.task", "OSError", "disk full on volume data"), false},
		{"VariablesAloneAreNoFailure",
			learned("a.task", "ValueError", Wildcard, Wildcard, Wildcard),
			msg("b.task", "ValueError", "connection reset peer"), false},
		{"MostlyVariablesAgainstWords",
			learned("a.task", "ValueError", "bad", Wildcard, Wildcard, Wildcard),
			msg("b.task", "ValueError", "bad input for field"), false},
		{"ASpanTemplateAlignsOnItsWords",
			Template{Task: "a.task", Class: "UploadError", Span: true,
				Tokens: []string{"upload", "of", Wildcard, "failed", "after", "retries"}, Fixed: make([]bool, 6)},
			msg("b.task", "UploadError", "upload of 1.16 KB failed after retries"), true},
		{"ASpanTemplateAgainstAnotherMessage",
			Template{Task: "a.task", Class: "UploadError", Span: true,
				Tokens: []string{"upload", "of", Wildcard, "failed", "after", "retries"}, Fixed: make([]bool, 6)},
			msg("b.task", "UploadError", "download of 1.16 KB refused by peer"), false},
		{"NoTokens", Template{Class: "X"}, Template{Class: "X"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := SameFailure(c.a, c.b); got != c.same {
				t.Errorf("SameFailure(%q, %q) = %v, want %v", c.a.Tokens, c.b.Tokens, got, c.same)
			}
			if got := SameFailure(c.b, c.a); got != c.same {
				t.Errorf("SameFailure the other way round = %v, want %v", got, c.same)
			}
		})
	}
}

// The demo outage with fresh job and request ids in each task is always
// one failure, and the template the two share keeps every constant word.
func TestSameFailureWithFreshValues(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	hex := func() string { return fmt.Sprintf("%08x", r.Uint32()) }
	for range 200 {
		a := MessageTemplate("payments.charge", "ServiceUnavailable", demoOutage("payments.charge", "/v1/payment_intents", r.IntN(1e6), hex()))
		b := MessageTemplate("payments.refund", "ServiceUnavailable", demoOutage("payments.refund", "/v1/refunds", r.IntN(1e6), hex()))
		if !SameFailure(a, b) {
			t.Fatalf("%q and %q are not one failure", a.Tokens, b.Tokens)
		}
	}
	a := MessageTemplate("payments.charge", "ServiceUnavailable", demoOutage("payments.charge", "/v1/payment_intents", 1, "aaaa1111"))
	b := MessageTemplate("payments.refund", "ServiceUnavailable", demoOutage("payments.refund", "/v1/refunds", 2, "bbbb2222"))
	// The two differ only where each names its task: the shared template
	// is either one's with a variable there.
	want := slices.Clone(a.Tokens)
	want[0] = Wildcard
	if got := Covering(a, b); !slices.Equal(got, want) {
		t.Errorf("Covering = %q\nwant       %q", Text(got), Text(want))
	}
	if other := Covering(a, MessageTemplate("x", "ServiceUnavailable", "something else entirely")); !slices.Equal(other, a.Tokens) {
		t.Errorf("Covering of two failures = %q, want the first's tokens", other)
	}
}

// SameFailure is symmetric, and a message is the same failure as itself
// when it has a constant word that is not its task's name.
func FuzzSameFailure(f *testing.F) {
	f.Add("payments.charge", demoOutage("payments.charge", "/v1/x", 1, "aa11"), "payments.refund", "payments.refund failed: 503")
	f.Add("a", "'sku'", "b", "'quantity'")
	f.Add("t", "12 34", "u", "x y z")
	f.Fuzz(func(t *testing.T, taskA, msgA, taskB, msgB string) {
		a, b := MessageTemplate(taskA, "E", msgA), MessageTemplate(taskB, "E", msgB)
		if SameFailure(a, b) != SameFailure(b, a) {
			t.Fatalf("SameFailure(%q, %q) is not symmetric", a.Tokens, b.Tokens)
		}
		self := SameFailure(a, a)
		hasWord := slices.ContainsFunc(a.Tokens, func(w string) bool { return w != Wildcard && w != taskA })
		if self != hasWord {
			t.Fatalf("SameFailure(%q, itself) = %v, want %v", a.Tokens, self, hasWord)
		}
	})
}
