package grouping_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/grouping"
	"github.com/redrive/redrive/mask"
)

// The dead-job corpus: failures as workers report them (the seed's
// catalogue, seed/catalog.go, the demo's errors, worker/demo, and the
// styles of the libraries jobs fail in), each a label, each letter with
// fresh values. Within one task, class and place only the message can tell
// two failures apart, so the traps are there: the same failure with other
// ids, hosts, amounts, currencies, warehouses, paths, durations is one
// group; failures that differ in a status code, an errno, a signal, a
// missing key, a constraint, a decline code or most of their words are
// two.

// corpusFailure is one failure: a label, where it happens and its message
// template ({name} is a fresh value per letter, see corpusValues).
type corpusFailure struct {
	label, task, class, message, trace string
	weight                             int
}

// pyTrace is a Python traceback ending in the failure's own frame, at one
// of two line numbers: a deploy moves code, the place stays.
func pyTrace(file, fn, class string) string {
	return "Traceback (most recent call last):\n" +
		"  File \"/srv/app/.venv/lib/python3.12/site-packages/redrive_worker/runner.py\", line 231, in run_job\n" +
		"    result = handler(*job.args, **job.kwargs)\n" +
		"  File \"/srv/app/" + file + "\", line {line}, in " + fn + "\n" +
		"    do()\n" + class + ": {message}"
}

func goTrace(pkg, fn string) string {
	return "goroutine {n} [running]:\n" +
		"github.com/acme/shop/" + pkg + "." + fn + "(0xc000{hex6})\n" +
		"\t/build/shop/" + pkg + "/" + pkg + ".go:{line} +0x1d\n" +
		"github.com/acme/shop/worker.(*Runner).run(0xc000{hex6})\n" +
		"\t/build/shop/worker/runner.go:88 +0x2a\n"
}

var corpusFailures = []corpusFailure{
	// payments.charge: the seed's declines, one failure per decline code.
	{label: "decline-insufficient", task: "payments.charge", class: "PaymentDeclined", weight: 70,
		message: "card ending {card} declined for order {order} (insufficient_funds)"},
	{label: "decline-expired", task: "payments.charge", class: "PaymentDeclined", weight: 25,
		message: "card ending {card} declined for order {order} (expired_card)"},
	{label: "decline-dnh", task: "payments.charge", class: "PaymentDeclined", weight: 15,
		message: "card ending {card} declined for order {order} (do_not_honor)"},
	// The demo's declines (worker/demo/errors.go): one group per decline
	// code, whatever the amount and the currency.
	{label: "demo-decline-insufficient", task: "shop.permanent", class: "PaymentDeclined", weight: 20,
		message: "charge {ch} for order {order} declined: {amount} {currency} (decline_code=insufficient_funds)"},
	{label: "demo-decline-expired", task: "shop.permanent", class: "PaymentDeclined", weight: 20,
		message: "charge {ch} for order {order} declined: {amount} {currency} (decline_code=expired_card)"},
	{label: "demo-decline-dnh", task: "shop.permanent", class: "PaymentDeclined", weight: 20,
		message: "charge {ch} for order {order} declined: {amount} {currency} (decline_code=do_not_honor)"},
	{label: "demo-decline-velocity", task: "shop.permanent", class: "PaymentDeclined", weight: 20,
		message: "charge {ch} for order {order} declined: {amount} {currency} (decline_code=card_velocity_exceeded)"},
	{label: "unsupported-currency", task: "payments.charge", class: "UnsupportedCurrency", weight: 30,
		message: "unsupported currency {xcur} for merchant {acct}"},
	{label: "gateway-timeout", task: "payments.charge", class: "GatewayTimeout", weight: 18,
		message: "charge for order {order} timed out after {ms}ms waiting for the payment gateway"},
	{label: "stripe-connection", task: "payments.charge", class: "stripe.error.APIConnectionError", weight: 20,
		message: "Unexpected error communicating with Stripe. If this problem persists, let us know at support@stripe.com.\n\n(Network error: ReadTimeout: HTTPSConnectionPool(host='api.stripe.com', port=443): Read timed out. (read timeout=80))"},
	{label: "stripe-idempotency", task: "payments.charge", class: "stripe.error.IdempotencyError", weight: 8,
		message: "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than 'charge-{order}' if you meant to execute a different request."},
	{label: "stripe-no-customer", task: "payments.charge", class: "stripe.error.InvalidRequestError", weight: 12,
		message: "Request {req}: No such customer: '{cus}'"},
	{label: "stripe-no-intent", task: "payments.charge", class: "stripe.error.InvalidRequestError", weight: 10,
		message: "Request {req}: No such payment_intent: '{pi}'"},
	// The demo's payments outage (worker/demo/shop.go): one group.
	{label: "payments-outage", task: "shop.charge", class: "ServiceUnavailable", weight: 40,
		message: "shop.charge for job {n}: payments-provider returned 503 Service Unavailable for POST /v1/payment_intents (request_id {req8}): upstream connect error or disconnect/reset before headers"},
	{label: "demo-capture-refused", task: "shop.flaky", class: "ConnectionRefusedError", weight: 20,
		message: "capture {amount} {currency} for order {order}: payments-gateway: dial tcp {ip}:443: connect: connection refused"},

	// payments.refund
	{label: "already-refunded", task: "payments.refund", class: "stripe.error.InvalidRequestError", weight: 15,
		message: "Charge {ch} has already been refunded."},
	{label: "refund-exceeds", task: "payments.refund", class: "RefundExceedsCapture", weight: 8,
		message: "refund of {amount} exceeds the {amount2} still captured on order {order}"},

	// inventory.reserve
	{label: "out-of-stock", task: "inventory.reserve", class: "InsufficientStock", weight: 35,
		message: "cannot reserve {qty} x {sku} for order {order}: only {left} left in warehouse '{warehouse}'"},
	{label: "unique-pkey", task: "inventory.reserve", class: "psycopg2.errors.UniqueViolation", weight: 14,
		message: "duplicate key value violates unique constraint \"reservations_pkey\"\nDETAIL:  Key (id)=({n}) already exists.",
		trace:   pyTrace("shop/inventory/stock.py", "reserve", "psycopg2.errors.UniqueViolation")},
	{label: "unique-order-sku", task: "inventory.reserve", class: "psycopg2.errors.UniqueViolation", weight: 14,
		message: "duplicate key value violates unique constraint \"reservations_order_id_sku_key\"\nDETAIL:  Key (order_id, sku)=({order}, {sku}) already exists.",
		trace:   pyTrace("shop/inventory/stock.py", "reserve", "psycopg2.errors.UniqueViolation")},
	{label: "pg-refused", task: "inventory.reserve", class: "psycopg2.OperationalError", weight: 20,
		message: "connection to server at \"{ip}\", port 5432 failed: Connection refused\n\tIs the server running on that host and accepting TCP/IP connections?"},
	{label: "pg-timeout", task: "inventory.reserve", class: "psycopg2.OperationalError", weight: 10,
		message: "connection to server at \"{ip}\", port 5432 failed: timeout expired"},
	{label: "inventory-outage", task: "shop.always_fail", class: "ServiceUnavailable", weight: 30,
		message: "reserve stock for order {order}: inventory-service returned 503 Service Unavailable for POST /v2/reservations/{sku} (request_id {req8}): upstream connect error or disconnect/reset before headers"},

	// webhooks.deliver
	{label: "wh-read-timeout", task: "webhooks.deliver", class: "requests.exceptions.ReadTimeout", weight: 40,
		message: "HTTPSConnectionPool(host='{whhost}', port=443): Read timed out. (read timeout=10)"},
	{label: "wh-503", task: "webhooks.deliver", class: "requests.exceptions.HTTPError", weight: 25,
		message: "503 Server Error: Service Unavailable for url: https://{whhost}/webhooks/{uuid}"},
	{label: "wh-404", task: "webhooks.deliver", class: "requests.exceptions.HTTPError", weight: 15,
		message: "404 Client Error: Not Found for url: https://{whhost}/hooks/{uuid}?attempt={n}"},
	{label: "wh-status-502", task: "webhooks.deliver", class: "WebhookDeliveryError", weight: 20,
		message: "endpoint returned status 502 after {ms} ms (subscription {uuid})"},
	{label: "wh-status-429", task: "webhooks.deliver", class: "WebhookDeliveryError", weight: 20,
		message: "endpoint returned status 429 after {ms} ms (subscription {uuid})"},
	{label: "wh-dns", task: "webhooks.deliver", class: "requests.exceptions.ConnectionError", weight: 12,
		message: "HTTPSConnectionPool(host='{whhost}', port=443): Max retries exceeded with url: /webhooks/redrive (Caused by NameResolutionError(\"<urllib3.connection.HTTPSConnection object at {addr}>: Failed to resolve '{whhost}' ([Errno -2] Name or service not known)\"))"},
	{label: "wh-refused", task: "webhooks.deliver", class: "requests.exceptions.ConnectionError", weight: 12,
		message: "HTTPSConnectionPool(host='{whhost}', port=443): Max retries exceeded with url: /webhooks/redrive (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at {addr}>: Failed to establish a new connection: [Errno 111] Connection refused'))"},

	// emails.send_receipt
	{label: "smtp-refused", task: "emails.send_receipt", class: "smtplib.SMTPRecipientsRefused", weight: 30,
		message: "{'{email}': (550, b'5.1.1 <{email}>: Recipient address rejected: User unknown in virtual mailbox table')}"},
	{label: "redis-111", task: "emails.send_receipt", class: "redis.exceptions.ConnectionError", weight: 8,
		message: "Error 111 connecting to {host}:6379. Connection refused."},
	{label: "redis-110", task: "emails.send_receipt", class: "redis.exceptions.ConnectionError", weight: 8,
		message: "Error 110 connecting to {host}:6379. Connection timed out."},
	{label: "ses-throttling", task: "emails.send_receipt", class: "botocore.exceptions.ClientError", weight: 12,
		message: "An error occurred (Throttling) when calling the SendEmail operation (reached max retries: 4): Maximum sending rate exceeded."},
	{label: "celery-sigkill", task: "emails.send_receipt", class: "celery.exceptions.WorkerLostError", weight: 10,
		message: "Worker exited prematurely: signal 9 (SIGKILL) Job: {n}."},
	{label: "celery-sigterm", task: "emails.send_receipt", class: "celery.exceptions.WorkerLostError", weight: 10,
		message: "Worker exited prematurely: signal 15 (SIGTERM) Job: {n}."},

	// reports.generate: keys and errnos in one place.
	{label: "key-region", task: "reports.generate", class: "KeyError", weight: 18,
		message: "'region'", trace: pyTrace("shop/reports/builder.py", "summarise", "KeyError")},
	{label: "key-sku", task: "reports.generate", class: "KeyError", weight: 12,
		message: "'sku'", trace: pyTrace("shop/reports/builder.py", "summarise", "KeyError")},
	{label: "key-quantity", task: "reports.generate", class: "KeyError", weight: 12,
		message: "'quantity'", trace: pyTrace("shop/reports/builder.py", "summarise", "KeyError")},
	{label: "disk-full", task: "reports.generate", class: "OSError", weight: 18,
		message: "[Errno 28] No space left on device: '/tmp/reports/{uuid}.pdf'"},
	{label: "permission", task: "reports.generate", class: "OSError", weight: 8,
		message: "[Errno 13] Permission denied: '/var/reports/{account}/{uuid}.pdf'"},
	{label: "statement-timeout", task: "reports.generate", class: "psycopg2.errors.QueryCanceled", weight: 15,
		message: "canceling statement due to statement timeout"},

	// Go workers: net/http and runtime panics.
	{label: "go-refused", task: "media.thumbnails", class: "*url.Error", weight: 15,
		message: "Get \"https://cdn.acme.io/uploads/{uuid}.jpg\": dial tcp {ip}:443: connect: connection refused"},
	{label: "go-deadline", task: "media.thumbnails", class: "*url.Error", weight: 15,
		message: "Get \"https://cdn.acme.io/uploads/{uuid}.jpg\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"},
	{label: "go-index", task: "media.thumbnails", class: "runtime.Error", weight: 10,
		message: "runtime error: index out of range [{idx}] with length {idx2}", trace: goTrace("media", "pick")},
	{label: "go-nil", task: "media.thumbnails", class: "runtime.Error", weight: 10,
		message: "runtime error: invalid memory address or nil pointer dereference", trace: goTrace("media", "pick")},
	{label: "k8s-not-ready", task: "deploy.rollout", class: "TimeoutError", weight: 10,
		message: "pod {pod} in namespace payments not ready after {dur} (last probe at {ts})"},
	{label: "jwt-expired", task: "auth.refresh", class: "jwt.ExpiredSignatureError", weight: 10,
		message: "Signature has expired for token {jwt}"},
	{label: "bad-base64", task: "auth.refresh", class: "binascii.Error", weight: 8,
		message: "Incorrect padding in {b64} from {host}"},
	{label: "validation-domain", task: "shop.permanent", class: "ValidationError", weight: 10,
		message: "invalid customer_email for order {order}: address has no domain part"},
}

// corpusValues draw the fresh values of the templates.
var corpusValues = map[string]func(r *rand.Rand) string{
	"card": func(r *rand.Rand) string { return fmt.Sprintf("%04d", r.IntN(10000)) },
	"order": func(r *rand.Rand) string {
		return pick(r, fmt.Sprintf("ORD-%d", 10000+r.IntN(990000)), "ord_"+b32(r, 8))
	},
	"ch": func(r *rand.Rand) string {
		return pick(r, fmt.Sprintf("ch_3%d", 100000000+r.IntN(900000000)), "ch_"+hexs(r, 12))
	},
	"cus":  func(r *rand.Rand) string { return "cus_" + b62(r, 14) },
	"pi":   func(r *rand.Rand) string { return "pi_3" + b62(r, 23) },
	"acct": func(r *rand.Rand) string { return "acct_1" + b62(r, 15) },
	"req":  func(r *rand.Rand) string { return "req_" + b62(r, 14) },
	"req8": func(r *rand.Rand) string { return "req_" + hexs(r, 8) },
	"amount": func(r *rand.Rand) string {
		return fmt.Sprintf("%d.%02d", 5+r.IntN(900), r.IntN(100))
	},
	"amount2":   func(r *rand.Rand) string { return fmt.Sprintf("%d.%02d", 1+r.IntN(120), r.IntN(100)) },
	"currency":  func(r *rand.Rand) string { return pick(r, "EUR", "USD", "GBP") },
	"xcur":      func(r *rand.Rand) string { return pick(r, "XBT", "DOGE") },
	"ms":        func(r *rand.Rand) string { return fmt.Sprint(200 + r.IntN(30000)) },
	"n":         func(r *rand.Rand) string { return fmt.Sprint(1 + r.IntN(900000)) },
	"qty":       func(r *rand.Rand) string { return fmt.Sprint(3 + r.IntN(10)) },
	"left":      func(r *rand.Rand) string { return fmt.Sprint(r.IntN(3)) },
	"sku":       func(r *rand.Rand) string { return fmt.Sprintf("SKU-%d", 1000+r.IntN(9000)) },
	"warehouse": func(r *rand.Rand) string { return pick(r, "ams-1", "fra-2", "iad-1", "sfo-3") },
	"ip":        func(r *rand.Rand) string { return fmt.Sprintf("10.0.%d.%d", r.IntN(8), 2+r.IntN(253)) },
	"host": func(r *rand.Rand) string {
		return pick(r, fmt.Sprintf("payments-%d.eu-west-1", r.IntN(9)), fmt.Sprintf("redis-%d.internal", r.IntN(4)), fmt.Sprintf("10.0.%d.%d", r.IntN(8), r.IntN(250)))
	},
	"whhost": func(r *rand.Rand) string {
		return pick(r, "hooks.acme-shop.com", "api.brightlane.io", "webhooks.northwind.dev", "hooks.zapier.com", "integrations.globex.net", "n8n.pixelforge.app", "erp.contoso-retail.com")
	},
	"uuid": func(r *rand.Rand) string {
		return fmt.Sprintf("%s-%s-4%s-a%s-%s", hexs(r, 8), hexs(r, 4), hexs(r, 3), hexs(r, 3), hexs(r, 12))
	},
	"addr": func(r *rand.Rand) string { return "0x7f" + hexs(r, 10) },
	"email": func(r *rand.Rand) string {
		return pick(r, "maria.garcia", "li.wei", "noah.johnson") + fmt.Sprint(r.IntN(100)) + "@" + pick(r, "gmail.com", "web.de")
	},
	"account": func(r *rand.Rand) string { return fmt.Sprint(100 + r.IntN(20000)) },
	"idx":     func(r *rand.Rand) string { return fmt.Sprint(r.IntN(9)) },
	"idx2":    func(r *rand.Rand) string { return fmt.Sprint(r.IntN(9)) },
	"pod": func(r *rand.Rand) string {
		return "payments-api-" + hexs(r, 9) + "-" + b32(r, 5)
	},
	"dur": func(r *rand.Rand) string {
		return pick(r, fmt.Sprintf("%dm%ds", r.IntN(10), r.IntN(60)), fmt.Sprintf("%.3fs", r.Float64()*100), fmt.Sprintf("%dms", r.IntN(1000)))
	},
	"ts": func(r *rand.Rand) string {
		return time.Date(2026, 12, 1+r.IntN(6), r.IntN(24), r.IntN(60), r.IntN(60), 0, time.UTC).Format(time.RFC3339)
	},
	"jwt": func(r *rand.Rand) string {
		enc := base64.RawURLEncoding
		return enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." +
			enc.EncodeToString(fmt.Appendf(nil, `{"sub":"%d","exp":%d}`, r.IntN(1e6), 1.7e9+r.IntN(1e8))) + "." + b62(r, 43)
	},
	"b64":  func(r *rand.Rand) string { return base64.StdEncoding.EncodeToString([]byte(b62(r, 10+r.IntN(20)))) },
	"line": func(r *rand.Rand) string { return pick(r, "74", "81") },
	"hex6": func(r *rand.Rand) string { return hexs(r, 6) },
}

func pick(r *rand.Rand, choices ...string) string { return choices[r.IntN(len(choices))] }

func fromAlphabet(r *rand.Rand, alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

func hexs(r *rand.Rand, n int) string { return fromAlphabet(r, "0123456789abcdef", n) }
func b32(r *rand.Rand, n int) string  { return fromAlphabet(r, "0123456789ABCDEFGHJKMNPQRSTVWXYZ", n) }
func b62(r *rand.Rand, n int) string {
	return fromAlphabet(r, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", n)
}

var placeholderRE = regexp.MustCompile(`\{([a-z][a-z0-9]*)\}`)

// fill replaces each {name} of tmpl with a value: the same name the same
// value within one letter, as a letter's message and traceback agree.
func fill(t testing.TB, r *rand.Rand, tmpl string, drawn map[string]string) string {
	return placeholderRE.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := m[1 : len(m)-1]
		if v, ok := drawn[name]; ok {
			return v
		}
		draw, ok := corpusValues[name]
		if !ok {
			t.Fatalf("no value %s", name)
		}
		drawn[name] = draw(r)
		return drawn[name]
	})
}

// labelled is a letter and the failure it is.
type labelled struct {
	label  string
	letter grouping.Letter
}

// corpus draws n letters of corpusFailures by their weights, in a random
// order.
func corpus(t testing.TB, seed uint64, n int) []labelled {
	r := rand.New(rand.NewPCG(seed, 1))
	total := 0
	for _, f := range corpusFailures {
		total += f.weight
	}
	out := make([]labelled, 0, n)
	for range n {
		w := r.IntN(total)
		f := corpusFailures[0]
		for _, f = range corpusFailures {
			if w -= f.weight; w < 0 {
				break
			}
		}
		drawn := map[string]string{}
		msg := fill(t, r, f.message, drawn)
		trace := ""
		if f.trace != "" {
			drawn["message"] = strings.SplitN(msg, "\n", 2)[0]
			trace = fill(t, r, f.trace, drawn)
		}
		out = append(out, labelled{f.label, grouping.Letter{Task: f.task, Class: f.class, Message: msg, Traceback: trace}})
	}
	return out
}

// groupAll groups the letters in order and returns their final groups.
func groupAll(t testing.TB, letters []grouping.Letter) []string {
	final, _ := groupOnline(t, letters)
	return final
}

// groupOnline groups the letters in order and returns their final groups
// and the groups they were given at the time.
func groupOnline(t testing.TB, letters []grouping.Letter) (final, atTheTime []string) {
	g := grouping.New(nil)
	ids := make([]string, len(letters))
	for i, l := range letters {
		id, err := g.Group(context.Background(), l)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	return g.Resolve(ids), ids
}

// checkAccuracy groups letters and fails below min, logging what was split
// and what was merged.
func checkAccuracy(t *testing.T, name string, labels []string, letters []grouping.Letter, min float64) {
	t.Helper()
	got, atTheTime := groupOnline(t, letters)
	acc := accuracy(labels, got)
	same := 0
	for i := range got {
		if got[i] == atTheTime[i] {
			same++
		}
	}
	t.Logf("%s: %d letters of %d failures in %d groups: grouping accuracy %.3f; %.3f of the letters were in their final group from the start",
		name, len(letters), countDistinct(labels), countDistinct(got), acc, float64(same)/float64(len(got)))
	if acc < min {
		msgs := make([][2]string, len(letters))
		for i, l := range letters {
			msgs[i] = [2]string{l.Task + " " + l.Class + ": " + strings.SplitN(l.Message, "\n", 2)[0], labels[i]}
		}
		showErrors(t, msgs, labels, got)
		t.Errorf("%s: grouping accuracy %.3f, want at least %.2f", name, acc, min)
	}
}

func countDistinct(xs []string) int {
	seen := map[string]bool{}
	for _, x := range xs {
		seen[x] = true
	}
	return len(seen)
}

func TestDeadJobAccuracy(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		c := corpus(t, seed, 1500)
		labels, letters := make([]string, len(c)), make([]grouping.Letter, len(c))
		for i, l := range c {
			labels[i], letters[i] = l.label, l.letter
		}
		checkAccuracy(t, fmt.Sprintf("in-test corpus, seed %d", seed), labels, letters, 0.95)
	}
}

// TestDeadJobsFile measures the labelled corpus in testdata/deadjobs.jsonl
// when it is there, or the one REDRIVE_DEADJOBS_FILE names.
func TestDeadJobsFile(t *testing.T) {
	path := filepath.Join("testdata", "deadjobs.jsonl")
	if p := os.Getenv("REDRIVE_DEADJOBS_FILE"); p != "" {
		path = p // another corpus of the kind, e.g. corpusgen with another seed
	}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		t.Skip("testdata/deadjobs.jsonl is not there yet")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var labels []string
	var letters []grouping.Letter
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		var row struct{ Failure, Task, Class, Message, Traceback string }
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatal(err)
		}
		labels = append(labels, row.Failure)
		letters = append(letters, grouping.Letter{Task: row.Task, Class: row.Class, Message: row.Message, Traceback: row.Traceback})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	checkAccuracy(t, path, labels, letters, 0.95)
}

// sameGroup reports whether the messages, as letters of one task and
// class, all end in one group.
func groupsOf(t *testing.T, msgs ...string) []string {
	t.Helper()
	letters := make([]grouping.Letter, len(msgs))
	for i, m := range msgs {
		letters[i] = grouping.Letter{Task: "t", Class: "E", Message: m}
	}
	return groupAll(t, letters)
}

// TestFreshValuesOneGroup: a failure's letters with fresh values are one
// group, for every failure of the corpus.
func TestFreshValuesOneGroup(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, f := range corpusFailures {
		var msgs []string
		for range 12 {
			msgs = append(msgs, fill(t, r, f.message, map[string]string{}))
		}
		g := groupsOf(t, msgs...)
		if countDistinct(g) != 1 {
			t.Errorf("%s: %d groups for one failure, e.g. %q and %q", f.label, countDistinct(g), msgs[0], msgs[1])
		}
	}
}

// TestConstantWordSplits: short messages that differ in one constant word
// are different failures.
func TestConstantWordSplits(t *testing.T) {
	for _, pair := range [][2]string{
		{"connection refused", "connection reset"},
		{"VM started", "VM stopped"},
		{"upload to bucket failed: access denied", "upload to bucket failed: quota exceeded"},
		{"KeyError: 'sku'", "KeyError: 'quantity'"},
		{"request failed with status 502", "request failed with status 429"},
		{"[Errno 111] Connection refused", "[Errno 110] Connection refused"},
		{"duplicate key value violates unique constraint \"orders_pkey\"", "duplicate key value violates unique constraint \"orders_email_key\""},
		{"503 Server Error: Service Unavailable for url: https://a.example/x/1", "404 Client Error: Not Found for url: https://a.example/x/1"},
		{"card ending 4242 declined (insufficient_funds)", "card ending 4242 declined (expired_card)"},
	} {
		if g := groupsOf(t, pair[0], pair[1]); g[0] == g[1] {
			t.Errorf("%q and %q are one group", pair[0], pair[1])
		}
	}
}

// TestMaskedSecretSameGroup: a message whose secret the console masked
// (mask.Placeholder) is in the group of the same message unmasked, and so
// is one with the secret starred out.
func TestMaskedSecretSameGroup(t *testing.T) {
	policy := mask.ForKeys(mask.DefaultKeys)
	for _, c := range []struct{ msg, kwargs string }{
		{"card 4242424242424242 declined by issuer for order ORD-1234", `{"card_number": "4242424242424242"}`},
		{"login to smtp.example.com failed for password hunter2 of user ops", `{"smtp_password": "hunter2"}`},
		{"invalid token sk_live_51HxyzAbCdEf for merchant acct_12", `{"api_token": "sk_live_51HxyzAbCdEf"}`},
	} {
		masked := policy.MaskText(c.msg, nil, json.RawMessage(c.kwargs))
		if !strings.Contains(masked, mask.Placeholder) {
			t.Fatalf("%q: masking hid nothing: %q", c.msg, masked)
		}
		starred := strings.ReplaceAll(masked, mask.Placeholder, "********")
		g := groupsOf(t, c.msg, masked, starred)
		if g[0] != g[1] || g[0] != g[2] {
			t.Errorf("%q, %q and %q are not one group", c.msg, masked, starred)
		}
	}
}

// TestDemoMessages: the demo's payments outage is one group whatever the
// request id; its declines are one group per decline code, whatever the
// order, charge, amount and currency (a decline code is the issuer's
// reason: insufficient funds and an expired card ask different things of
// the customer, as the seed's catalogue has them as different failures).
func TestDemoMessages(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	var outage []string
	for range 20 {
		outage = append(outage, fmt.Sprintf("shop.charge for job %d: payments-provider returned 503 Service Unavailable for POST /v1/payment_intents (request_id req_%s): upstream connect error or disconnect/reset before headers",
			r.IntN(100000), hexs(r, 8)))
	}
	if g := groupsOf(t, outage...); countDistinct(g) != 1 {
		t.Errorf("the payments outage is %d groups", countDistinct(g))
	}
	codes := []string{"insufficient_funds", "expired_card", "do_not_honor", "card_velocity_exceeded"}
	var declines, labels []string
	for range 80 {
		code := pick(r, codes...)
		declines = append(declines, fmt.Sprintf("charge ch_%s for order ORD-%d declined: %d.%02d %s (decline_code=%s)",
			hexs(r, 12), 10000+r.IntN(90000), r.IntN(500), r.IntN(100), pick(r, "EUR", "USD", "GBP"), code))
		labels = append(labels, code)
	}
	got := groupsOf(t, declines...)
	if acc := accuracy(labels, got); acc != 1 {
		t.Errorf("declines: grouping accuracy %.3f, want one group per decline code", acc)
	}
}

// BenchmarkGroup groups a realistic mix of dead-job letters, learned
// already: the cost on the worker's dead-lettering path, per letter.
func BenchmarkGroup(b *testing.B) {
	c := corpus(b, 11, 4096)
	g := grouping.New(nil)
	for _, l := range c {
		g.Group(context.Background(), l.letter)
	}
	c = corpus(b, 12, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := g.Group(context.Background(), c[i%len(c)].letter); err != nil {
			b.Fatal(err)
		}
	}
}
