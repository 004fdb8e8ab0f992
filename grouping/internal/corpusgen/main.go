// Command corpusgen writes grouping/testdata/deadjobs.jsonl, the labelled
// corpus of dead letters that grouping is measured against: letters of a
// shop's Python (Celery, Django) and Go workers over one week, one JSON
// object a line,
//
//	{"failure": "<label>", "task": "…", "class": "…", "message": "…", "traceback": "…"}
//
// in the order they arrived. A label names one failure: one bug or one
// incident, as the engineer on call would count them.
//
// Regenerate it from the module root with
//
//	go run ./grouping/internal/corpusgen > grouping/testdata/deadjobs.jsonl
//
// (add -stats to list each failure's letters on stderr). The output is the
// same on every run: one math/rand/v2 PCG with a fixed seed draws every
// value, in the order of the table, and what depends on a build (line
// shifts, +0x offsets, type addresses) is a hash of the build's name.
//
// How a letter is made. The table, failures, gives each failure its label,
// task, error class, a message template, an optional traceback template, a
// weight (how many letters it has) and when they arrive: spread over the
// week, in one burst (an outage), every day at one hour (a nightly batch),
// or between two releases (a bug shipped, then fixed). Each letter draws a
// time, the release running then, the fleet that ran it (which decides the
// absolute paths in its traceback) and fresh values for the {placeholders}
// of its templates; the letters are then sorted by time.
//
// Placeholders. {name} is a value of the table values, drawn once per
// letter, so that a letter's message and traceback agree; {class} and
// {message} are the letter's own. In tracebacks:
//
//   - {app}, {site}, {std}: the Python fleet's application root,
//     site-packages and standard library;
//   - {gosrc}, {gomod}, {goroot}: the Go build's source tree, module cache
//     and Go root;
//   - {L:n}: line n of the application file named earlier on the same line,
//     moved by the edits the releases up to the letter's made to that file;
//   - {off}: the +0x offset of an application frame in the letter's build;
//     {roff} that of a runtime or dependency frame (it changes only with the
//     architecture);
//   - {b:name}: an address fixed within a build (a type, an itab);
//   - {ptr}: a fresh heap pointer at each use.
//
// A misspelt placeholder stops the generator, so the table cannot print one.
package main

import (
	"bufio"
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The seed of the one generator every value is drawn from.
const seed1, seed2 = 20260302, 7

// The week the letters failed in (UTC).
var (
	weekStart = at("03-02 00:00")
	weekEnd   = at("03-09 00:00")
)

// releases are the deploys of both workers, the first one before the week.
// A Python traceback's line numbers and a Go build's offsets are those of
// the release running when the letter failed.
var releases = []time.Time{at("02-27 09:15"), at("03-03 14:12"), at("03-05 10:47"), at("03-07 16:05")}

// at parses "01-02 15:04" as a time of 2026, UTC.
func at(s string) time.Time {
	t, err := time.Parse("2006-01-02 15:04", "2026-"+s)
	if err != nil {
		panic(err)
	}
	return t
}

// failure is one bug or incident and how its letters look.
type failure struct {
	label   string // the ground truth: letters with one label are one failure
	task    string
	class   string
	message string // template
	trace   string // template; "" for none
	weight  int    // how many letters it has in the corpus
	when    arrival
}

// arrival says when a failure's letters failed: uniformly in [from, until),
// or, when daily is set, in the span that starts at that time of each day in
// [from, until).
type arrival struct {
	from, until time.Time
	daily       time.Duration // time of day the nightly job starts; 0 for none
	span        time.Duration // how long its letters keep arriving each day
}

// always: all week. since, until, between: a bug shipped or fixed by a
// release. burst: an outage. nightly: a batch job.
var always = arrival{from: weekStart, until: weekEnd}

func since(t time.Time) arrival          { return arrival{from: t, until: weekEnd} }
func until(t time.Time) arrival          { return arrival{from: weekStart, until: t} }
func between(from, to time.Time) arrival { return arrival{from: from, until: to} }
func burst(start string, d time.Duration) arrival {
	t := at(start)
	return arrival{from: t, until: t.Add(d)}
}
func nightly(hhmm string, span time.Duration) arrival {
	d, err := time.ParseDuration(strings.Replace(hhmm, ":", "h", 1) + "m")
	if err != nil {
		panic(err)
	}
	return arrival{from: weekStart, until: weekEnd, daily: d, span: span}
}

// ---------------------------------------------------------------------
// Traceback building blocks.

// Python: a frame of the application, of a package in site-packages, of the
// standard library.
func app(file string, line int, fn, code string) string {
	return fmt.Sprintf("  File \"{app}/%s\", line {L:%d}, in %s\n    %s\n", file, line, fn, code)
}
func lib(file string, line int, fn, code string) string {
	return fmt.Sprintf("  File \"{site}/%s\", line %d, in %s\n    %s\n", file, line, fn, code)
}
func std(file string, line int, fn, code string) string {
	return fmt.Sprintf("  File \"{std}/%s\", line %d, in %s\n    %s\n", file, line, fn, code)
}

// celery is the top of every task's traceback: the Celery worker calling
// the task.
var celery = lib("celery/app/trace.py", 477, "trace_task", "R = retval = fun(*args, **kwargs)") +
	lib("celery/app/trace.py", 760, "__protected_call__", "return self.run(*args, **kwargs)")

// py is a task's traceback as Celery logs it: the worker's frames, frames,
// and the exception line.
func py(frames ...string) string {
	return "Traceback (most recent call last):\n" + celery + strings.Join(frames, "") + "{class}: {message}"
}

// raised is an earlier exception of a chain: its frames and exception line.
// exc is the whole line ("ConnectionRefusedError: [Errno 111] ...").
func raised(exc string, frames ...string) string {
	return "Traceback (most recent call last):\n" + strings.Join(frames, "") + exc
}

// The separators Python prints between the exceptions of a chain.
const (
	directCause    = "\n\nThe above exception was the direct cause of the following exception:\n\n"
	duringHandling = "\n\nDuring handling of the above exception, another exception occurred:\n\n"
)

// Go: a frame of the application, of a module in the module cache, of the
// runtime. A Go trace lists the innermost frame first.
func gofn(fn, file string, line int) string {
	return fmt.Sprintf("%s\n\t{gosrc}/%s:{L:%d} +{off}\n", fn, file, line)
}

// inlined is an application frame inlined into its caller: no offset.
func inlined(fn, file string, line int) string {
	return fmt.Sprintf("%s\n\t{gosrc}/%s:{L:%d}\n", fn, file, line)
}
func godep(fn, path string, line int) string {
	return fmt.Sprintf("%s\n\t{gomod}/%s:%d +{roff}\n", fn, path, line)
}

const (
	shopGo  = "github.com/acme/shop-workers"
	redrive = "github.com/redrive/redrive/worker"
	// redriveMod is where the worker library sits in the module cache.
	redriveMod = "github.com/redrive/redrive@v0.14.2/worker/executor.go"
	// ctxArg is a context.Context argument as a Go trace prints it.
	ctxArg = "{{b:ctxtype}, {ptr}}"
)

// goPanic is a recovered panic as Redrive's Go worker records it: the
// panic value, then the stack taken in the deferred recover (its own
// frames and the runtime's at the top, the frame that panicked below them).
// kind is the runtime's frames between panic and the application.
func goPanic(kind string, frames ...string) string {
	return "panic: {message}\n\ngoroutine {goroutine} [running]:\n" +
		"runtime/debug.Stack()\n\t{goroot}/src/runtime/debug/stack.go:24 +{roff}\n" +
		godep(redrive+".callHandler.func1()", redriveMod, 181) +
		"panic({{b:panictype}?, {b:panicvalue}?})\n\t{goroot}/src/runtime/panic.go:770 +{roff}\n" +
		kind + strings.Join(frames, "") +
		godep(redrive+".callHandler({{b:ctxtype}?, {ptr}?}, {b:handler}?, {ptr}?)", redriveMod, 185) +
		godep(redrive+".(*Worker).runHandler({ptr}, "+ctxArg+", {ptr}, {ptr})", redriveMod, 166) +
		"created by " + redrive + ".(*Worker).execute in goroutine {goroutine2}\n\t{gomod}/" + redriveMod + ":104 +{roff}\n"
}

// The runtime's frames of three kinds of panic.
const (
	nilDeref  = "runtime.panicmem(...)\n\t{goroot}/src/runtime/panic.go:261\nruntime.sigpanic()\n\t{goroot}/src/runtime/signal_unix.go:881 +{roff}\n"
	indexOOR  = "runtime.goPanicIndex({idxhex}, {lenhex})\n\t{goroot}/src/runtime/panic.go:114 +{roff}\n"
	nilMapSet = "runtime.mapassign_faststr({b:maptype}, 0x0, {{ptr}, {keylen}})\n\t{goroot}/src/runtime/map_faststr.go:205 +{roff}\n"
)

// goTraced is the traceback worker.WithTraceback attaches to an error:
// the frames from its caller up, as name(...) and file:line.
func goTraced(frames ...string) string {
	return strings.Join(frames, "") +
		redrive + ".callHandler(...)\n\t{gomod}/" + redriveMod + ":185\n" +
		redrive + ".(*Worker).runHandler(...)\n\t{gomod}/" + redriveMod + ":166\n"
}
func gotr(fn, file string, line int) string {
	return fmt.Sprintf("%s(...)\n\t{gosrc}/%s:{L:%d}\n", fn, file, line)
}

// Library frames shared by several failures.
var (
	stripeCreate = lib("stripe/api_resources/abstract/createable_api_resource.py", 22, "create", `response, api_key = requestor.request("post", url, params, headers)`) +
		lib("stripe/api_requestor.py", 122, "request", "resp = self.interpret_response(rbody, rcode, rheaders)") +
		lib("stripe/api_requestor.py", 399, "interpret_response", "self.handle_error_response(rbody, rcode, resp.data, rheaders)") +
		lib("stripe/api_requestor.py", 159, "handle_error_response", "raise err")

	sessionPost = lib("requests/sessions.py", 637, "post", `return self.request("POST", url, data=data, json=json, **kwargs)`) +
		lib("requests/sessions.py", 589, "request", "resp = self.send(prep, **send_kwargs)") +
		lib("requests/sessions.py", 703, "send", "r = adapter.send(request, **kwargs)")
	raiseForStatus = lib("requests/models.py", 1021, "raise_for_status", "raise HTTPError(http_error_msg, response=self)")

	// urllib3NewConn is a refused or timed-out TCP connect, then urllib3
	// wrapping it, then giving up: the first three blocks of a
	// requests.exceptions.ConnectionError's chain.
	urllib3NewConn = func(errnoLine, errno string) string {
		return raised(errnoLine,
			lib("urllib3/connection.py", 174, "_new_conn", "conn = connection.create_connection("),
			lib("urllib3/util/connection.py", 95, "create_connection", "raise err"),
			lib("urllib3/util/connection.py", 85, "create_connection", "sock.connect(sa)"),
		) + duringHandling + raised("urllib3.exceptions.NewConnectionError: <urllib3.connection.HTTPSConnection object at {hexaddr}>: Failed to establish a new connection: "+errno,
			lib("urllib3/connectionpool.py", 703, "urlopen", "httplib_response = self._make_request("),
			lib("urllib3/connectionpool.py", 386, "_make_request", "self._validate_conn(conn)"),
			lib("urllib3/connectionpool.py", 1042, "_validate_conn", "conn.connect()"),
			lib("urllib3/connection.py", 363, "connect", "self.sock = conn = self._new_conn()"),
			lib("urllib3/connection.py", 186, "_new_conn", "raise NewConnectionError("),
		) + duringHandling + raised("urllib3.exceptions.MaxRetryError: {message}",
			lib("requests/adapters.py", 489, "send", "resp = conn.urlopen("),
			lib("urllib3/connectionpool.py", 787, "urlopen", "retries = retries.increment("),
			lib("urllib3/util/retry.py", 592, "increment", "raise MaxRetryError(_pool, url, error or ResponseError(cause))"),
		) + duringHandling
	}

	botoCall = lib("botocore/client.py", 535, "_api_call", "return self._make_api_call(operation_name, kwargs)") +
		lib("botocore/client.py", 980, "_make_api_call", "raise error_class(parsed_response, operation_name)")

	smtpSend = app("shop/emails/transport.py", 64, "send", "smtp.send_message(msg)") +
		std("smtplib.py", 986, "send_message", "return self.sendmail(from_addr, to_addrs, flatmsg, mail_options,") +
		std("smtplib.py", 901, "sendmail", "raise SMTPRecipientsRefused(senderrs)")

	// redisRefused: redis-py failing to connect, with the socket error it
	// handles.
	redisRefused = func(frames ...string) string {
		return raised("ConnectionRefusedError: [Errno 111] Connection refused",
			lib("redis/connection.py", 707, "connect", "sock = self.retry.call_with_retry("),
			lib("redis/retry.py", 46, "call_with_retry", "return do()"),
			lib("redis/connection.py", 708, "<lambda>", "lambda: self._connect(), lambda error: self.disconnect(error)"),
			lib("redis/connection.py", 1006, "_connect", "raise err"),
			lib("redis/connection.py", 994, "_connect", "sock.connect(socket_address)"),
		) + duringHandling + py(append(frames,
			lib("redis/client.py", 1266, "execute_command", "conn = self.connection or pool.get_connection(command_name, **options)"),
			lib("redis/connection.py", 1461, "get_connection", "connection.connect()"),
			lib("redis/connection.py", 713, "connect", "raise ConnectionError(self._error_message(e))"),
		)...)
	}

	// Django's cursor and its re-raise of a psycopg2 error as
	// django.db.utils.*: the innermost frames of a Django database error.
	djangoExecute = lib("django/db/backends/utils.py", 67, "execute", "return self._execute_with_wrappers(") +
		lib("django/db/backends/utils.py", 80, "_execute_with_wrappers", "return executor(sql, params, many, context)") +
		lib("django/db/backends/utils.py", 84, "_execute", "with self.db.wrap_database_errors:") +
		lib("django/db/utils.py", 91, "__exit__", "raise dj_exc_value.with_traceback(traceback) from exc_value") +
		djangoLeaf
	djangoLeaf   = lib("django/db/backends/utils.py", 89, "_execute", "return self.cursor.execute(sql, params)")
	djangoCreate = lib("django/db/models/manager.py", 87, "manager_method", "return getattr(self.get_queryset(), name)(*args, **kwargs)") +
		lib("django/db/models/query.py", 658, "create", "obj.save(force_insert=True, using=self.db)") +
		lib("django/db/models/base.py", 814, "save", "self.save_base(") +
		lib("django/db/models/base.py", 877, "save_base", "updated = self._save_table(") +
		lib("django/db/models/base.py", 1020, "_save_table", "results = self._do_insert(") +
		lib("django/db/models/base.py", 1061, "_do_insert", "return manager._insert(") +
		lib("django/db/models/manager.py", 87, "manager_method", "return getattr(self.get_queryset(), name)(*args, **kwargs)") +
		lib("django/db/models/query.py", 1805, "_insert", "return query.get_compiler(using=using).execute_sql(returning_fields)") +
		lib("django/db/models/sql/compiler.py", 1822, "execute_sql", "cursor.execute(sql, params)") +
		djangoExecute
	// djangoConnect: opening a connection, where a refused one is raised.
	djangoConnect = lib("django/db/backends/base/base.py", 289, "ensure_connection", "self.connect()") +
		lib("django/utils/asyncio.py", 26, "inner", "return func(*args, **kwargs)") +
		lib("django/db/backends/base/base.py", 270, "connect", "self.connection = self.get_new_connection(conn_params)") +
		lib("django/utils/asyncio.py", 26, "inner", "return func(*args, **kwargs)") +
		lib("django/db/backends/postgresql/base.py", 275, "get_new_connection", "connection = self.Database.connect(**conn_params)") +
		lib("psycopg2/__init__.py", 122, "connect", "conn = _connect(dsn, connection_factory=connection_factory, **kwasync)")
	djangoAtomic = lib("django/db/transaction.py", 198, "__enter__", "if not connection.get_autocommit():") +
		lib("django/db/backends/base/base.py", 454, "get_autocommit", "self.ensure_connection()") +
		lib("django/utils/asyncio.py", 26, "inner", "return func(*args, **kwargs)") +
		lib("django/db/backends/base/base.py", 288, "ensure_connection", "with self.wrap_database_errors:") +
		lib("django/db/utils.py", 91, "__exit__", "raise dj_exc_value.with_traceback(traceback) from exc_value") +
		djangoConnect

	// SQLAlchemy executing a statement, and wrapping the DBAPI's error.
	sqlaExecute = lib("sqlalchemy/orm/session.py", 2308, "execute", "return self._execute_internal(") +
		lib("sqlalchemy/orm/session.py", 2190, "_execute_internal", "result: Result[Any] = compile_state_cls.orm_execute_statement(") +
		lib("sqlalchemy/orm/bulk_persistence.py", 1617, "orm_execute_statement", "result = conn.execute(") +
		lib("sqlalchemy/engine/base.py", 1416, "execute", "return meth(") +
		lib("sqlalchemy/sql/elements.py", 516, "_execute_on_connection", "return connection._execute_clauseelement(") +
		lib("sqlalchemy/engine/base.py", 1639, "_execute_clauseelement", "ret = self._execute_context(") +
		lib("sqlalchemy/engine/base.py", 1848, "_execute_context", "return self._exec_single_context(") +
		lib("sqlalchemy/engine/base.py", 1988, "_exec_single_context", "self._handle_dbapi_exception(") +
		lib("sqlalchemy/engine/base.py", 2344, "_handle_dbapi_exception", "raise sqlalchemy_exception.with_traceback(exc_info[2]) from e") +
		sqlaLeaf
	sqlaLeaf = lib("sqlalchemy/engine/base.py", 1967, "_exec_single_context", "self.dialect.do_execute(") +
		lib("sqlalchemy/engine/default.py", 924, "do_execute", "cursor.execute(statement, parameters)")
)

// djangoChain is a Django database error's traceback: psycopg2's exception
// (whose message ends in a newline, hence the extra blank line), then
// Django's re-raise of it, through frames.
func djangoChain(pgClass, leaf string, frames ...string) string {
	return raised(pgClass+": {message}\n", leaf) + directCause + py(frames...)
}

// ---------------------------------------------------------------------
// The failures.

var failures = []failure{
	// ---- payments.charge: Stripe. Card declines are a steady stream; each
	// of Stripe's messages is its own failure.
	{label: "charge-card-declined", task: "payments.charge", class: "stripe.error.CardError", weight: 52, when: always,
		message: "Request {req}: Your card was declined.",
		trace:   py(chargeTask, chargeGateway, stripeCreate)},
	{label: "charge-insufficient-funds", task: "payments.charge", class: "stripe.error.CardError", weight: 26, when: always,
		message: "Request {req}: Your card has insufficient funds.",
		trace:   py(chargeTask, chargeGateway, stripeCreate)},
	{label: "charge-expired-card", task: "payments.charge", class: "stripe.error.CardError", weight: 11, when: always,
		message: "Request {req}: Your card has expired.",
		trace:   py(chargeTask, chargeGateway, stripeCreate)},
	// A migration in the 03-03 release copied test-mode customer ids.
	{label: "charge-no-such-customer", task: "payments.charge", class: "stripe.error.InvalidRequestError", weight: 23, when: since(releases[1].Add(40 * time.Minute)),
		message: "Request {req}: No such customer: '{cus}'",
		trace:   py(chargeTask, chargeGateway, stripeCreate)},
	// The Sunday evening batch of manual captures hit Stripe's rate limit.
	{label: "charge-stripe-rate-limited", task: "payments.charge", class: "stripe.error.RateLimitError", weight: 34, when: burst("03-02 21:04", 22*time.Minute),
		message: "Request {req}: Request rate limit exceeded. Learn more about rate limits here https://stripe.com/docs/rate-limits.",
		trace:   py(chargeTask, chargeGateway, stripeCreate)},
	// Trap (one failure): the currency code is data.
	{label: "charge-unsupported-currency", task: "payments.charge", class: "shop.billing.errors.UnsupportedCurrency", weight: 17, when: always,
		message: "unsupported currency {badcurrency} for merchant {acct}",
		trace: py(
			app("shop/tasks/payments.py", 36, "charge", "currency = currencies.settlement_currency(order, merchant)"),
			app("shop/billing/currency.py", 27, "settlement_currency", `raise UnsupportedCurrency("unsupported currency %s for merchant %s" % (code, merchant.stripe_account))`),
		)},

	// ---- payments.refund and payments.capture
	{label: "refund-idempotency-key-reused", task: "payments.refund", class: "stripe.error.IdempotencyError", weight: 14, when: always,
		message: "Request {req}: Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than 'refund-{ord}' if you meant to execute a different request.",
		trace:   py(refundTask, refundGateway, stripeCreate)},
	{label: "refund-already-refunded", task: "payments.refund", class: "stripe.error.InvalidRequestError", weight: 16, when: always,
		message: "Request {req}: Charge {ch} has already been refunded.",
		trace:   py(refundTask, refundGateway, stripeCreate)},
	{label: "capture-no-such-payment-intent", task: "payments.capture", class: "stripe.error.InvalidRequestError", weight: 8, when: always,
		message: "Request {req}: No such payment_intent: '{pi}'",
		trace: py(
			app("shop/tasks/payments.py", 77, "capture", "gateway.capture(order.payment_intent_id, amount=order.total)"),
			app("shop/billing/gateway.py", 152, "capture", "intent = stripe.PaymentIntent.retrieve(payment_intent_id)"),
			lib("stripe/api_resources/abstract/api_resource.py", 20, "retrieve", "instance.refresh()"),
			lib("stripe/api_resources/abstract/api_resource.py", 24, "refresh", `self.refresh_from(self.request("get", self.instance_url()))`),
			lib("stripe/stripe_object.py", 312, "request", "response, api_key = requestor.request(method, url, params, headers)"),
			lib("stripe/api_requestor.py", 122, "request", "resp = self.interpret_response(rbody, rcode, rheaders)"),
			lib("stripe/api_requestor.py", 399, "interpret_response", "self.handle_error_response(rbody, rcode, resp.data, rheaders)"),
			lib("stripe/api_requestor.py", 159, "handle_error_response", "raise err"),
		)},

	// ---- subscriptions.renew: the nightly renewal run. Trap (two
	// failures): the same message but for the decline code.
	{label: "renew-declined-insufficient-funds", task: "subscriptions.renew", class: "shop.billing.errors.PaymentDeclined", weight: 31, when: nightly("02:00", 35*time.Minute),
		message: "card declined for subscription {sub}: insufficient_funds (customer {cus}, invoice {inv})",
		trace:   renewTrace("Your card has insufficient funds.")},
	{label: "renew-declined-do-not-honor", task: "subscriptions.renew", class: "shop.billing.errors.PaymentDeclined", weight: 15, when: nightly("02:00", 35*time.Minute),
		message: "card declined for subscription {sub}: do_not_honor (customer {cus}, invoice {inv})",
		trace:   renewTrace("Your card was declined.")},

	// ---- emails.send_receipt
	// Trap (two failures): SMTP 550 (bad addresses, all week) and 421 (our
	// sending reputation, one morning), the same exception otherwise.
	{label: "receipt-recipient-unknown-550", task: "emails.send_receipt", class: "smtplib.SMTPRecipientsRefused", weight: 27, when: always,
		message: "{'{email}': (550, b'5.1.1 <{email}>: Recipient address rejected: User unknown in virtual mailbox table')}",
		trace:   py(receiptTask, smtpSend)},
	{label: "receipt-rate-limited-421", task: "emails.send_receipt", class: "smtplib.SMTPRecipientsRefused", weight: 29, when: burst("03-08 07:12", 110*time.Minute),
		message: "{'{email}': (421, b'4.7.28 [203.0.113.25      15] Our system has detected an unusual rate of unsolicited mail originating from your IP address. To protect our users from spam, mail sent from your IP address has been temporarily rate limited. Please visit https://support.google.com/mail/?p=UnsolicitedRateLimitError to review our Bulk Email Senders Guidelines. {gsmtp} - gsmtp')}",
		trace:   py(receiptTask, smtpSend)},
	// Trap (two failures): the same AttributeError raised in two functions.
	// Guest checkouts have no customer; the 03-05 release broke the receipt
	// context for them and the 03-07 release fixed it.
	{label: "receipt-guest-order-context", task: "emails.send_receipt", class: "AttributeError", weight: 21, when: between(releases[2], releases[3]),
		message: "'NoneType' object has no attribute 'email'",
		trace: py(
			app("shop/tasks/emails.py", 31, "send_receipt", "context = receipts.build_context(order)"),
			app("shop/emails/receipts.py", 58, "build_context", `"customer_email": order.customer.email,`),
		)},
	{label: "receipt-deleted-user-recipient", task: "emails.send_receipt", class: "AttributeError", weight: 9, when: always,
		message: "'NoneType' object has no attribute 'email'",
		trace: py(
			app("shop/tasks/emails.py", 29, "send_receipt", "to = recipients.resolve(order)"),
			app("shop/emails/recipients.py", 22, "resolve", "return order.placed_by.profile.email"),
		)},
	// Trap (two failures): one redis outage, two tasks. Trap (one failure):
	// the node's address varies.
	{label: "receipt-redis-refused", task: "emails.send_receipt", class: "redis.exceptions.ConnectionError", weight: 24, when: burst("03-05 16:02", 38*time.Minute),
		message: "Error 111 connecting to {redisip}:6379. Connection refused.",
		trace: redisRefused(
			app("shop/tasks/emails.py", 27, "send_receipt", "throttle.acquire(order.merchant_id)"),
			app("shop/emails/throttle.py", 33, "acquire", "count = self.redis.incr(key)"),
			lib("redis/commands/core.py", 1941, "incrby", `return self.execute_command("INCRBY", name, amount)`),
		)},

	// ---- emails.send_password_reset
	{label: "password-reset-redis-refused", task: "emails.send_password_reset", class: "redis.exceptions.ConnectionError", weight: 15, when: burst("03-05 16:03", 36*time.Minute),
		message: "Error 111 connecting to {redisip}:6379. Connection refused.",
		trace: redisRefused(
			app("shop/tasks/emails.py", 68, "send_password_reset", "token = tokens.issue(user_id)"),
			app("shop/accounts/tokens.py", 41, "issue", "self.redis.set(key, user_id, ex=RESET_TTL, nx=True)"),
			lib("redis/commands/core.py", 2297, "set", `return self.execute_command("SET", *pieces, **options)`),
		)},

	// ---- inventory.reserve
	// Trap (one failure): the warehouse is one of four.
	{label: "reserve-out-of-stock", task: "inventory.reserve", class: "shop.inventory.errors.OutOfStock", weight: 38, when: always,
		message: "{sku} out of stock at warehouse {warehouse} (requested {qty}, available {avail}) for order {ord}",
		trace: py(
			app("shop/tasks/inventory.py", 24, "reserve", "reservations.reserve(order_id, sku, quantity)"),
			app("shop/inventory/reservations.py", 71, "reserve", "raise OutOfStock(sku, stock.warehouse.name, quantity, stock.available, order_id)"),
		)},
	{label: "reserve-deadlock", task: "inventory.reserve", class: "django.db.utils.OperationalError", weight: 22, when: burst("03-06 18:00", 55*time.Minute),
		message: "deadlock detected\nDETAIL:  Process {pid} waits for ShareLock on transaction {txid}; blocked by process {pid2}.\nProcess {pid2} waits for ShareLock on transaction {txid2}; blocked by process {pid}.\nHINT:  See server log for query details.\nCONTEXT:  while locking tuple ({block},{slot}) in relation \"inventory_stocklevel\"",
		trace: djangoChain("psycopg2.errors.DeadlockDetected", djangoLeaf,
			app("shop/tasks/inventory.py", 24, "reserve", "reservations.reserve(order_id, sku, quantity)"),
			app("shop/inventory/reservations.py", 57, "reserve", "stock = StockLevel.objects.select_for_update().get(sku=sku, warehouse=warehouse)"),
			lib("django/db/models/query.py", 633, "get", "num = len(clone)"),
			lib("django/db/models/query.py", 380, "__len__", "self._fetch_all()"),
			lib("django/db/models/query.py", 1881, "_fetch_all", "self._result_cache = list(self._iterable_class(self))"),
			lib("django/db/models/query.py", 91, "__iter__", "results = compiler.execute_sql("),
			lib("django/db/models/sql/compiler.py", 1562, "execute_sql", "cursor.execute(sql, params)"),
			djangoExecute,
		)},
	// Trap (two failures): the database failover of 03-04, in two tasks.
	{label: "reserve-db-connect-refused", task: "inventory.reserve", class: "django.db.utils.OperationalError", weight: 31, when: burst("03-04 02:14", 17*time.Minute),
		message: pgRefused,
		trace: raised("psycopg2.OperationalError: {message}\n", djangoConnect) + directCause + py(
			app("shop/tasks/inventory.py", 24, "reserve", "reservations.reserve(order_id, sku, quantity)"),
			app("shop/inventory/reservations.py", 52, "reserve", "with transaction.atomic():"),
			djangoAtomic,
		)},

	// ---- inventory.import_feed: the suppliers' nightly feeds. Trap (two
	// failures): two missing keys, one function. Trap (one failure): the
	// unparseable quantity varies.
	{label: "feed-missing-sku", task: "inventory.import_feed", class: "KeyError", weight: 24, when: burst("03-03 05:02", 16*time.Minute),
		message: "'sku'",
		trace:   py(feedTask, app("shop/inventory/feeds.py", 88, "parse_line", `sku = row["sku"].strip().upper()`))},
	{label: "feed-missing-quantity", task: "inventory.import_feed", class: "KeyError", weight: 17, when: burst("03-06 05:01", 21*time.Minute),
		message: "'quantity'",
		trace:   py(feedTask, app("shop/inventory/feeds.py", 91, "parse_line", `quantity = int(row["quantity"])`))},
	{label: "feed-bad-quantity", task: "inventory.import_feed", class: "ValueError", weight: 12, when: nightly("05:00", 25*time.Minute),
		message: "invalid literal for int() with base 10: {badqty}",
		trace:   py(feedTask, app("shop/inventory/feeds.py", 91, "parse_line", `quantity = int(row["quantity"])`))},

	// ---- webhooks.deliver. Trap (one failure): any of seven merchants'
	// endpoints.
	{label: "webhook-read-timeout", task: "webhooks.deliver", class: "requests.exceptions.ReadTimeout", weight: 44, when: always,
		message: "HTTPSConnectionPool(host='{whhost}', port=443): Read timed out. (read timeout=10)",
		trace: raised("TimeoutError: The read operation timed out",
			lib("urllib3/connectionpool.py", 449, "_make_request", "six.raise_from(e, None)"),
			"  File \"<string>\", line 3, in raise_from\n",
			lib("urllib3/connectionpool.py", 444, "_make_request", "httplib_response = conn.getresponse()"),
			std("http/client.py", 1375, "getresponse", "response.begin()"),
			std("http/client.py", 318, "begin", "version, status, reason = self._read_status()"),
			std("http/client.py", 279, "_read_status", `line = str(self.fp.readline(_MAXLINE + 1), "iso-8859-1")`),
			std("socket.py", 705, "readinto", "return self._sock.recv_into(b)"),
			std("ssl.py", 1274, "recv_into", "return self.read(nbytes, buffer)"),
			std("ssl.py", 1130, "read", "return self._sslobj.read(len, buffer)"),
		) + duringHandling + raised("urllib3.exceptions.ReadTimeoutError: HTTPSConnectionPool(host='{whhost}', port=443): Read timed out. (read timeout=10)",
			lib("requests/adapters.py", 489, "send", "resp = conn.urlopen("),
			lib("urllib3/connectionpool.py", 787, "urlopen", "retries = retries.increment("),
			lib("urllib3/util/retry.py", 550, "increment", "raise six.reraise(type(error), error, _stacktrace)"),
			lib("urllib3/packages/six.py", 770, "reraise", "raise value"),
			lib("urllib3/connectionpool.py", 703, "urlopen", "httplib_response = self._make_request("),
			lib("urllib3/connectionpool.py", 451, "_make_request", "self._raise_timeout(err=e, url=url, timeout_value=read_timeout)"),
			lib("urllib3/connectionpool.py", 340, "_raise_timeout", "raise ReadTimeoutError("),
		) + duringHandling + py(webhookTask, sessionPost,
			lib("requests/adapters.py", 578, "send", "raise ReadTimeout(e, request=request)"))},
	{label: "webhook-cert-expired", task: "webhooks.deliver", class: "requests.exceptions.SSLError", weight: 11, when: since(at("03-06 00:00")),
		message: "HTTPSConnectionPool(host='erp.contoso-retail.com', port=443): Max retries exceeded with url: /hooks/shop/orders (Caused by SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: certificate has expired (_ssl.c:1007)')))",
		trace: py(webhookTask, sessionPost,
			lib("requests/adapters.py", 563, "send", "raise SSLError(e, request=request)"))},

	// ---- fulfillment.push_order: ShipFast's API. Trap (two failures):
	// Errno 111 (their outage of 03-03) and Errno 110 (our egress firewall
	// change of 03-06), the same URL otherwise. This outage is the biggest
	// failure of the week.
	{label: "shipfast-push-refused", task: "fulfillment.push_order", class: "requests.exceptions.ConnectionError", weight: 96, when: burst("03-03 09:41", 3*time.Hour+12*time.Minute),
		message: "HTTPSConnectionPool(host='api.shipfast.io', port=443): Max retries exceeded with url: /v2/orders/{ord}/shipments (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at {hexaddr}>: Failed to establish a new connection: [Errno 111] Connection refused'))",
		trace: urllib3NewConn("ConnectionRefusedError: [Errno 111] Connection refused", "[Errno 111] Connection refused") +
			py(pushTask, pushClient, lib("requests/adapters.py", 565, "send", "raise ConnectionError(e, request=request)"))},
	{label: "shipfast-push-timed-out", task: "fulfillment.push_order", class: "requests.exceptions.ConnectionError", weight: 29, when: burst("03-06 19:08", 83*time.Minute),
		message: "HTTPSConnectionPool(host='api.shipfast.io', port=443): Max retries exceeded with url: /v2/orders/{ord}/shipments (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at {hexaddr}>: Failed to establish a new connection: [Errno 110] Connection timed out'))",
		trace: urllib3NewConn("TimeoutError: [Errno 110] Connection timed out", "[Errno 110] Connection timed out") +
			py(pushTask, pushClient, lib("requests/adapters.py", 565, "send", "raise ConnectionError(e, request=request)"))},

	// ---- fulfillment.sync_status. Trap (two failures): 503 during the
	// ShipFast outage, 404 for orders they never got, one URL pattern.
	{label: "shipfast-status-503", task: "fulfillment.sync_status", class: "requests.exceptions.HTTPError", weight: 62, when: burst("03-03 09:37", 3*time.Hour+30*time.Minute),
		message: "503 Server Error: Service Unavailable for url: https://api.shipfast.io/v2/orders/{ord}/status",
		trace:   py(statusTask, statusClient, raiseForStatus)},
	{label: "shipfast-status-404", task: "fulfillment.sync_status", class: "requests.exceptions.HTTPError", weight: 25, when: always,
		message: "404 Client Error: Not Found for url: https://api.shipfast.io/v2/orders/{ord}/status",
		trace:   py(statusTask, statusClient, raiseForStatus)},

	// ---- reports.generate: the nightly reports.
	{label: "report-statement-timeout", task: "reports.generate", class: "django.db.utils.OperationalError", weight: 19, when: nightly("03:00", 70*time.Minute),
		message: "canceling statement due to statement timeout",
		trace: djangoChain("psycopg2.errors.QueryCanceled", djangoLeaf,
			reportTask,
			app("shop/reports/builder.py", 76, "collect", "totals = revenue.daily_totals(account_id, start, end)"),
			app("shop/reports/revenue.py", 112, "daily_totals", `cursor.execute(REVENUE_BY_DAY_SQL, {"account_id": account_id, "start": start, "end": end})`),
			lib("django/db/backends/utils.py", 102, "execute", "return super().execute(sql, params)"),
			djangoExecute,
		)},
	// Trap (one failure): the soft time limit interrupts the report
	// wherever it is, so the frames under the application's differ.
	{label: "report-soft-time-limit", task: "reports.generate", class: "celery.exceptions.SoftTimeLimitExceeded", weight: 12, when: nightly("03:00", 70*time.Minute),
		message: "SoftTimeLimitExceeded()",
		trace: py(reportTask,
			app("shop/reports/builder.py", 81, "collect", "lines = [order_line(o) for o in revenue.order_rows(account_id, start, end)]"),
			app("shop/reports/builder.py", 81, "<listcomp>", "lines = [order_line(o) for o in revenue.order_rows(account_id, start, end)]"),
			app("shop/reports/revenue.py", 131, "order_rows", "yield from qs.iterator(chunk_size=2000)"),
			"{softlimitframes}",
			lib("billiard/pool.py", 229, "soft_timeout_sighandler", "raise SoftTimeLimitExceeded()"),
		)},
	{label: "report-growth-division-by-zero", task: "reports.generate", class: "ZeroDivisionError", weight: 1, when: always,
		message: "division by zero",
		trace: py(reportTask,
			app("shop/reports/builder.py", 84, "collect", "summary = revenue.summary(totals, previous_totals)"),
			app("shop/reports/revenue.py", 168, "summary", "growth = growth_rate(current, previous)"),
			app("shop/reports/metrics.py", 14, "growth_rate", "return (current - previous) / previous"),
		)},

	// ---- reports.export_csv. Trap (two failures): the same OOM kill as
	// media.generate_thumbnails, another task.
	{label: "export-oom-killed", task: "reports.export_csv", class: "billiard.exceptions.WorkerLostError", weight: 16, when: always,
		message: "Worker exited prematurely: signal 9 (SIGKILL) Job: {job}.",
		trace: "Traceback (most recent call last):\n" +
			lib("billiard/pool.py", 1265, "mark_as_worker_lost", "raise WorkerLostError(") + "{class}: {message}"},
	// Trap (one failure): the bucket is the merchant's region's.
	{label: "export-s3-put-denied", task: "reports.export_csv", class: "botocore.exceptions.ClientError", weight: 19, when: since(releases[3]),
		message: "An error occurred (AccessDenied) when calling the PutObject operation: User: arn:aws:sts::480213667021:assumed-role/shop-worker-prod/botocore-session-{session} is not authorized to perform: s3:PutObject on resource: \"arn:aws:s3:::shop-exports-{region}/exports/{datepath}/{uuid}.csv\" because no identity-based policy allows the s3:PutObject action",
		trace: py(
			app("shop/tasks/reports.py", 71, "export_csv", "storage.upload(path, key=export.s3_key)"),
			app("shop/reports/storage.py", 38, "upload", "self.s3.put_object(Bucket=self.bucket, Key=key, Body=fh, ContentType=\"text/csv\")"),
			botoCall,
		)},

	// ---- media.generate_thumbnails
	{label: "thumbnails-oom-killed", task: "media.generate_thumbnails", class: "billiard.exceptions.WorkerLostError", weight: 28, when: always,
		message: "Worker exited prematurely: signal 9 (SIGKILL) Job: {job}.",
		trace: "Traceback (most recent call last):\n" +
			lib("billiard/pool.py", 1265, "mark_as_worker_lost", "raise WorkerLostError(") + "{class}: {message}"},
	{label: "thumbnails-source-missing", task: "media.generate_thumbnails", class: "botocore.errorfactory.NoSuchKey", weight: 15, when: always,
		message: "An error occurred (NoSuchKey) when calling the GetObject operation: The specified key does not exist.",
		trace: py(
			app("shop/tasks/media.py", 33, "generate_thumbnails", "source = storage.open_upload(upload_id)"),
			app("shop/media/storage.py", 44, "open_upload", "obj = self.s3.get_object(Bucket=self.bucket, Key=\"uploads/%s\" % upload_id)"),
			botoCall,
		)},
	{label: "thumbnails-unidentified-image", task: "media.generate_thumbnails", class: "PIL.UnidentifiedImageError", weight: 9, when: always,
		message: "cannot identify image file '/tmp/tmp{tmpdir}/upload_{uuid}.{imgext}'",
		trace: py(
			app("shop/tasks/media.py", 36, "generate_thumbnails", "image = thumbnails.load(source)"),
			app("shop/media/thumbnails.py", 19, "load", "return Image.open(path)"),
			lib("PIL/Image.py", 3339, "open", "raise UnidentifiedImageError(msg)"),
		)},

	// ---- users.sync_crm. Trap (one failure): a fresh JWT in every URL.
	{label: "crm-unauthorized", task: "users.sync_crm", class: "requests.exceptions.HTTPError", weight: 18, when: burst("03-04 00:03", 6*time.Hour+5*time.Minute),
		message: "401 Client Error: Unauthorized for url: https://api.crm-partner.com/v3/contacts/{crmid}?access_token={jwt}",
		trace: py(
			app("shop/tasks/crm.py", 29, "sync_crm", "crm.upsert_contact(contact_from_user(user))"),
			app("shop/crm/client.py", 61, "upsert_contact", "resp.raise_for_status()"),
			raiseForStatus,
		)},

	// ---- orders.import_marketplace. Trap (two failures): two unique
	// constraints.
	{label: "import-duplicate-email", task: "orders.import_marketplace", class: "django.db.utils.IntegrityError", weight: 24, when: always,
		message: "duplicate key value violates unique constraint \"users_email_key\"\nDETAIL:  Key (email)=({email}) already exists.",
		trace: djangoChain("psycopg2.errors.UniqueViolation", djangoLeaf, importTask,
			app("shop/orders/importer.py", 63, "customer_for", "return User.objects.create(email=payload[\"buyer\"][\"email\"], source=marketplace)"),
			djangoCreate)},
	{label: "import-duplicate-order", task: "orders.import_marketplace", class: "django.db.utils.IntegrityError", weight: 20, when: burst("03-05 13:02", 41*time.Minute),
		message: "duplicate key value violates unique constraint \"orders_pkey\"\nDETAIL:  Key (id)=({orderno}) already exists.",
		trace: djangoChain("psycopg2.errors.UniqueViolation", djangoLeaf, importTask,
			app("shop/orders/importer.py", 49, "import_order", "order = Order.objects.create(id=payload[\"order_number\"], customer=customer, **fields)"),
			djangoCreate)},
	{label: "import-db-connect-refused", task: "orders.import_marketplace", class: "django.db.utils.OperationalError", weight: 66, when: burst("03-04 02:14", 18*time.Minute),
		message: pgRefused,
		trace: raised("psycopg2.OperationalError: {message}\n", djangoConnect) + directCause + py(
			app("shop/tasks/orders.py", 52, "import_marketplace", "order = importer.import_order(marketplace, payload)"),
			app("shop/orders/importer.py", 41, "import_order", "with transaction.atomic():"),
			djangoAtomic,
		)},

	// ---- invoices.render_pdf
	{label: "invoice-wkhtmltopdf-killed", task: "invoices.render_pdf", class: "subprocess.CalledProcessError", weight: 13, when: always,
		message: "Command '['wkhtmltopdf', '--quiet', '--page-size', 'A4', '/tmp/tmp{tmpdir}/{inv}.html', '/tmp/tmp{tmpdir}/{inv}.pdf']' died with <Signals.SIGKILL: 9>.",
		trace: py(
			app("shop/tasks/invoices.py", 22, "render_pdf", "pdf_path = pdf.render(invoice)"),
			app("shop/invoices/pdf.py", 47, "render", "subprocess.run(cmd, check=True, capture_output=True, timeout=120)"),
			std("subprocess.py", 526, "run", "raise CalledProcessError(retcode, process.args,"),
		)},
	{label: "invoice-template-vat-number", task: "invoices.render_pdf", class: "jinja2.exceptions.UndefinedError", weight: 1, when: always,
		message: "'shop.billing.models.Merchant object' has no attribute 'vat_number'",
		trace: py(
			app("shop/tasks/invoices.py", 22, "render_pdf", "pdf_path = pdf.render(invoice)"),
			app("shop/invoices/pdf.py", 31, "render", "html = template.render(invoice=invoice, merchant=invoice.merchant)"),
			lib("jinja2/environment.py", 1301, "render", "self.environment.handle_exception()"),
			lib("jinja2/environment.py", 936, "handle_exception", "raise rewrite_traceback_stack(source=source)"),
			"  File \"{app}/shop/templates/invoices/invoice.html\", line 18, in top-level template code\n    <p>VAT {{ merchant.vat_number }}</p>\n",
			lib("jinja2/environment.py", 485, "getattr", "return getattr(obj, attribute)"),
		)},
	{label: "invoice-latin1-encode", task: "invoices.render_pdf", class: "UnicodeEncodeError", weight: 1, when: always,
		message: "'latin-1' codec can't encode character '\\u2019' in position 41: ordinal not in range(256)",
		trace: py(
			app("shop/tasks/invoices.py", 22, "render_pdf", "pdf_path = pdf.render(invoice)"),
			app("shop/invoices/pdf.py", 39, "render", `fh.write(html.encode("latin-1"))`),
		)},

	// ---- search.index_product
	{label: "index-redis-timeout", task: "search.index_product", class: "redis.exceptions.TimeoutError", weight: 17, when: always,
		message: "Timeout reading from socket",
		trace: raised("TimeoutError: timed out",
			lib("redis/connection.py", 476, "_read_from_socket", "data = self._sock.recv(socket_read_size)"),
		) + duringHandling + py(
			app("shop/tasks/search.py", 18, "index_product", "with locks.hold(\"index:%s\" % product_id, timeout=30):"),
			app("shop/locks.py", 40, "hold", "if not lock.acquire(blocking_timeout=5):"),
			lib("redis/lock.py", 211, "acquire", "if self.do_acquire(token):"),
			lib("redis/lock.py", 227, "do_acquire", "if self.redis.set(self.name, token, nx=True, px=timeout):"),
			lib("redis/commands/core.py", 2297, "set", `return self.execute_command("SET", *pieces, **options)`),
			lib("redis/client.py", 1269, "execute_command", "return conn.retry.call_with_retry("),
			lib("redis/retry.py", 49, "call_with_retry", "fail(error)"),
			lib("redis/client.py", 1273, "<lambda>", "lambda error: self._disconnect_raise(conn, error),"),
			lib("redis/client.py", 1259, "_disconnect_raise", "raise error"),
			lib("redis/retry.py", 46, "call_with_retry", "return do()"),
			lib("redis/client.py", 1270, "<lambda>", "lambda: self._send_command_parse_response("),
			lib("redis/client.py", 1246, "_send_command_parse_response", "return self.parse_response(conn, command_name, **options)"),
			lib("redis/client.py", 1286, "parse_response", "response = connection.read_response()"),
			lib("redis/connection.py", 874, "read_response", "response = self._parser.read_response(disable_decoding=disable_decoding)"),
			lib("redis/connection.py", 347, "read_response", "result = self._read_response(disable_decoding=disable_decoding)"),
			lib("redis/connection.py", 357, "_read_response", "raw = self._buffer.readline()"),
			lib("redis/connection.py", 260, "readline", "self._read_from_socket()"),
			lib("redis/connection.py", 213, "_read_from_socket", `raise TimeoutError("Timeout reading from socket")`),
		)},

	// ---- analytics.track_event: the campaign of 03-07 outran the table's
	// capacity. The biggest failure of the corpus.
	{label: "analytics-dynamodb-throttled", task: "analytics.track_event", class: "botocore.exceptions.ClientError", weight: 112, when: burst("03-07 12:00", 95*time.Minute),
		message: "An error occurred (ThrottlingException) when calling the PutItem operation (reached max retries: 4): Rate exceeded",
		trace: py(
			app("shop/tasks/analytics.py", 17, "track_event", "events.record(event_type, payload, occurred_at=occurred_at)"),
			app("shop/analytics/events.py", 52, "record", "self.table.put_item(Item=item)"),
			lib("boto3/resources/factory.py", 580, "do_action", "response = action(self, *args, **kwargs)"),
			lib("boto3/resources/action.py", 88, "__call__", "response = getattr(parent.meta.client, operation_name)(*args, **params)"),
			botoCall,
		)},

	// ---- loyalty.award_points: a SQLAlchemy service.
	{label: "loyalty-server-closed-connection", task: "loyalty.award_points", class: "sqlalchemy.exc.OperationalError", weight: 21, when: burst("03-04 02:13", 19*time.Minute),
		message: "(psycopg2.OperationalError) server closed the connection unexpectedly\n\tThis probably means the server terminated abnormally\n\tbefore or while processing the request.\n\n[SQL: UPDATE loyalty_accounts SET points=(loyalty_accounts.points + %(points_1)s), updated_at=now() WHERE loyalty_accounts.user_id = %(user_id_1)s]\n[parameters: {'points_1': {points}, 'user_id_1': {userid}}]\n(Background on this error at: https://sqlalche.me/e/20/e3q8)",
		trace: raised("psycopg2.OperationalError: server closed the connection unexpectedly\n\tThis probably means the server terminated abnormally\n\tbefore or while processing the request.\n", sqlaLeaf) +
			directCause + py(loyaltyTask, sqlaExecute)},
	{label: "loyalty-pool-exhausted", task: "loyalty.award_points", class: "sqlalchemy.exc.TimeoutError", weight: 25, when: burst("03-08 18:01", 27*time.Minute),
		message: "QueuePool limit of size 5 overflow 10 reached, connection timed out, timeout 30.00 (Background on this error at: https://sqlalche.me/e/20/3o7r)",
		trace: py(loyaltyTask,
			lib("sqlalchemy/orm/session.py", 2308, "execute", "return self._execute_internal("),
			lib("sqlalchemy/orm/session.py", 2180, "_execute_internal", "conn = self._connection_for_bind(bind)"),
			lib("sqlalchemy/orm/session.py", 2047, "_connection_for_bind", "return trans._connection_for_bind(engine, execution_options)"),
			lib("sqlalchemy/orm/session.py", 1143, "_connection_for_bind", "conn = bind.connect()"),
			lib("sqlalchemy/engine/base.py", 145, "__init__", "self._dbapi_connection = engine.raw_connection()"),
			lib("sqlalchemy/engine/base.py", 3298, "raw_connection", "return self.pool.connect()"),
			lib("sqlalchemy/pool/base.py", 449, "connect", "return _ConnectionFairy._checkout(self)"),
			lib("sqlalchemy/pool/base.py", 1263, "_checkout", "fairy = _ConnectionRecord.checkout(pool)"),
			lib("sqlalchemy/pool/base.py", 712, "checkout", "rec = pool._do_get()"),
			lib("sqlalchemy/pool/impl.py", 157, "_do_get", "raise exc.TimeoutError("),
		)},

	// ---- orders.expire_carts. Trap (one failure): pod, duration and
	// timestamp change every time.
	{label: "cart-expiry-lock-lost", task: "orders.expire_carts", class: "shop.locks.LockLost", weight: 16, when: always,
		message: "lock 'carts:expiry' lost by {pod} after {held}s (acquired {acquired}, ttl 30s)",
		trace: py(
			app("shop/tasks/orders.py", 88, "expire_carts", "with locks.hold(\"carts:expiry\", timeout=30, renew=True):"),
			app("shop/locks.py", 71, "__exit__", "raise LockLost(self.name, self.owner, held_for, self.acquired_at, self.timeout)"),
		)},

	// ---- orders.quote_tax
	{label: "tax-service-timeout", task: "orders.quote_tax", class: "shop.integrations.errors.UpstreamTimeout", weight: 14, when: always,
		message: "tax service did not answer after {taxwait}s (POST https://tax.internal/v1/quotes, request id {uuid})",
		trace: py(
			app("shop/tasks/orders.py", 117, "quote_tax", "quote = tax.quote(order)"),
			app("shop/integrations/tax.py", 58, "quote", "raise UpstreamTimeout(\"tax service\", elapsed, \"POST\", url, request_id) from err"),
		)},
	{label: "tax-decimal-times-float", task: "orders.quote_tax", class: "TypeError", weight: 1, when: always,
		message: "unsupported operand type(s) for *: 'decimal.Decimal' and 'float'",
		trace: py(
			app("shop/tasks/orders.py", 117, "quote_tax", "quote = tax.quote(order)"),
			app("shop/integrations/tax.py", 44, "quote", "return local_estimate(order)"),
			app("shop/billing/tax.py", 23, "local_estimate", "return order.subtotal * rate.percentage / 100"),
		)},

	// ================= Go worker (github.com/acme/shop-workers) =========

	// ---- ledger.post_entries. The ledger API's outage of 03-06; the node
	// address varies (trap, one failure). Its slowness on other days is
	// another failure.
	{label: "ledger-post-refused", task: "ledger.post_entries", class: "net.OpError", weight: 81, when: burst("03-06 08:04", 76*time.Minute),
		message: `Post "https://ledger-api.internal:8443/v1/accounts/{uuid}/entries": dial tcp {ledgerip}:8443: connect: connection refused`},
	{label: "ledger-post-client-timeout", task: "ledger.post_entries", class: "http.timeoutError", weight: 34, when: always,
		message: `Post "https://ledger-api.internal:8443/v1/accounts/{uuid}/entries": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`},

	// ---- ledger.sync_account. Trap (two failures): the same nil pointer
	// dereference in two functions. Trap (one failure): goroutines,
	// pointers, offsets and build paths change.
	{label: "ledger-nil-entry-amount", task: "ledger.sync_account", class: "panic", weight: 27, when: until(releases[2]),
		message: "runtime error: invalid memory address or nil pointer dereference",
		trace: goPanic(nilDeref,
			gofn(shopGo+"/internal/ledger.(*Syncer).applyEntry({ptr}, "+ctxArg+", {ptr})", "internal/ledger/sync.go", 142),
			gofn(shopGo+"/internal/ledger.(*Syncer).SyncAccount({ptr}, "+ctxArg+", {{ptr}, 0x24})", "internal/ledger/sync.go", 97),
			gofn(shopGo+"/internal/jobs.syncAccount("+ctxArg+", {ptr})", "internal/jobs/ledger.go", 38),
		)},
	{label: "ledger-nil-balance-response", task: "ledger.sync_account", class: "panic", weight: 19, when: since(releases[2]),
		message: "runtime error: invalid memory address or nil pointer dereference",
		trace: goPanic(nilDeref,
			gofn(shopGo+"/internal/ledger.(*Client).fetchBalance({ptr}, "+ctxArg+", {{ptr}, 0x24})", "internal/ledger/client.go", 211),
			gofn(shopGo+"/internal/ledger.(*Syncer).SyncAccount({ptr}, "+ctxArg+", {{ptr}, 0x24})", "internal/ledger/sync.go", 88),
			gofn(shopGo+"/internal/jobs.syncAccount("+ctxArg+", {ptr})", "internal/jobs/ledger.go", 38),
		)},

	// ---- ledger.reconcile: the nightly reconciliation, under Redrive's
	// own timeout.
	{label: "reconcile-timeout", task: "ledger.reconcile", class: "Timeout", weight: 12, when: nightly("01:00", 12*time.Minute),
		message: "task ledger.reconcile did not finish within its 5m0s timeout: reconcile {yesterday}: scan entries after id {entryid}: context deadline exceeded"},

	// ---- pricing.refresh_rates. Trap (one failure): the index and length
	// vary. Trap (two failures): 502 and 429 differ only in the number.
	{label: "pricing-tier-index-out-of-range", task: "pricing.refresh_rates", class: "panic", weight: 23, when: since(releases[1]),
		message: "runtime error: index out of range [{idx}] with length {len}",
		trace: goPanic(indexOOR,
			inlined(shopGo+"/internal/pricing.(*RateTable).tierFor(...)", "internal/pricing/table.go", 64),
			gofn(shopGo+"/internal/pricing.(*RateTable).Apply({ptr}, {{ptr}, 0x3}, {{ptr}, 0x3, 0x4})", "internal/pricing/table.go", 41),
			gofn(shopGo+"/internal/pricing.(*Refresher).Refresh({ptr}, "+ctxArg+", {{ptr}, 0x3})", "internal/pricing/refresh.go", 58),
			gofn(shopGo+"/internal/jobs.refreshRates("+ctxArg+", {ptr})", "internal/jobs/pricing.go", 27),
		)},
	{label: "pricing-upstream-502", task: "pricing.refresh_rates", class: "pricing.UpstreamError", weight: 22, when: burst("03-05 22:10", 2*time.Hour+20*time.Minute),
		message: "refresh {currency} rates from https://rates.fxfeed.io/v3/latest?base={currency}: upstream returned status 502",
		trace:   pricingTrace},
	{label: "pricing-upstream-429", task: "pricing.refresh_rates", class: "pricing.UpstreamError", weight: 18, when: burst("03-08 12:30", 50*time.Minute),
		message: "refresh {currency} rates from https://rates.fxfeed.io/v3/latest?base={currency}: upstream returned status 429",
		trace:   pricingTrace},

	// ---- notify.push
	{label: "notify-nil-map-batch", task: "notify.push", class: "panic", weight: 14, when: since(releases[2].Add(3 * time.Hour)),
		message: "assignment to entry in nil map",
		trace: goPanic(nilMapSet,
			gofn(shopGo+"/internal/notify.(*Batcher).Add({ptr}, {{ptr}, 0x40}, {{ptr}, 0x2a})", "internal/notify/batch.go", 53),
			gofn(shopGo+"/internal/notify.(*Service).Push({ptr}, "+ctxArg+", {ptr})", "internal/notify/service.go", 117),
			gofn(shopGo+"/internal/jobs.pushNotification("+ctxArg+", {ptr})", "internal/jobs/notify.go", 31),
		)},
	{label: "notify-bad-device-token", task: "notify.push", class: "notify.APNsError", weight: 2, when: always,
		message: "apns: 400 BadDeviceToken for device {devicetoken} (apns-id {uuidupper})"},

	// ---- media.transcode_video: ffmpeg killed by the OOM killer.
	{label: "transcode-ffmpeg-oom-killed", task: "media.transcode_video", class: "exec.ExitError", weight: 21, when: always,
		message: "transcode {uuid} to 1080p: exit status 137: /bin/sh: line 1: {pid} Killed                  ffmpeg -hide_banner -loglevel error -i /var/cache/transcode/{uuid}/source.mov -vf scale=-2:1080 -c:v libx264 -preset veryfast /var/cache/transcode/{uuid}/1080p.mp4"},

	// ---- events.consume: another team's producer sent total_cents as a
	// string for two days. Trap (one failure): a base64 payload each time.
	{label: "events-total-cents-string", task: "events.consume", class: "json.UnmarshalTypeError", weight: 22, when: between(at("03-04 10:20"), at("03-06 15:45")),
		message: `decode message {msgid} from orders-events-sub (data="{eventb64}"): json: cannot unmarshal string into Go struct field OrderEvent.total_cents of type int64`,
		trace: goTraced(
			gotr(shopGo+"/internal/events.decode", "internal/events/decode.go", 36),
			gotr(shopGo+"/internal/events.(*Consumer).Handle", "internal/events/consumer.go", 74),
			gotr(shopGo+"/internal/jobs.consumeEvent", "internal/jobs/events.go", 22),
		)},
	{label: "events-unknown-type", task: "events.consume", class: "events.UnknownTypeError", weight: 1, when: always,
		message: `unknown event type "order.partially_refunded" in message {msgid}`,
		trace: goTraced(
			gotr(shopGo+"/internal/events.(*Consumer).Handle", "internal/events/consumer.go", 91),
			gotr(shopGo+"/internal/jobs.consumeEvent", "internal/jobs/events.go", 22),
		)},
}

// The failures' shared application frames.
var (
	chargeTask    = app("shop/tasks/payments.py", 41, "charge", "intent = gateway.create_payment_intent(order, payment_method=payment_method_id)")
	chargeGateway = app("shop/billing/gateway.py", 118, "create_payment_intent", "return stripe.PaymentIntent.create(")
	refundTask    = app("shop/tasks/payments.py", 102, "refund", "gateway.refund(order, charge_id, amount=amount)")
	refundGateway = app("shop/billing/gateway.py", 171, "refund", "return stripe.Refund.create(")
	receiptTask   = app("shop/tasks/emails.py", 35, "send_receipt", "mailer.send(to, subject, body, tags=[\"receipt\"])") +
		app("shop/emails/mailer.py", 42, "send", "self.transport.send(message)")
	feedTask = app("shop/tasks/inventory.py", 61, "import_feed", "for line in feeds.parse(path, supplier):") +
		app("shop/inventory/feeds.py", 57, "parse", "yield parse_line(row, supplier)")
	webhookTask = app("shop/tasks/webhooks.py", 48, "deliver", "response = self.session.post(endpoint, json=payload, timeout=10, headers=sign(payload))")
	pushTask    = app("shop/tasks/fulfillment.py", 26, "push_order", "shipment = shipfast.create_shipment(order)")
	pushClient  = app("shop/integrations/shipfast.py", 84, "create_shipment", "resp = self.session.post(self.url(\"/v2/orders/%s/shipments\" % order.public_id), json=body, timeout=(5, 30))") +
		sessionPost
	statusTask   = app("shop/tasks/fulfillment.py", 58, "sync_status", "status = shipfast.get_status(order)")
	statusClient = app("shop/integrations/shipfast.py", 102, "get_status", "resp.raise_for_status()")
	reportTask   = app("shop/tasks/reports.py", 33, "generate", "data = builder.collect(account_id, period)")
	importTask   = app("shop/tasks/orders.py", 52, "import_marketplace", "order = importer.import_order(marketplace, payload)") +
		app("shop/orders/importer.py", 44, "import_order", "customer = customer_for(payload, marketplace)")
	loyaltyTask = app("shop/tasks/loyalty.py", 19, "award_points", "ledger.award(user_id, points, reason=reason)") +
		app("shop/loyalty/ledger.py", 37, "award", "self.session.execute(stmt)")

	pricingTrace = goTraced(
		gotr(shopGo+"/internal/pricing.(*FeedClient).Latest", "internal/pricing/feed.go", 83),
		gotr(shopGo+"/internal/pricing.(*Refresher).Refresh", "internal/pricing/refresh.go", 51),
		gotr(shopGo+"/internal/jobs.refreshRates", "internal/jobs/pricing.go", 27),
	)
)

// pgRefused is libpq's refused connection during the failover.
const pgRefused = "could not connect to server: Connection refused\n\tIs the server running on host \"db-primary.internal\" (10.0.4.21) and accepting\n\tTCP/IP connections on port 5432?"

// renewTrace: Stripe's CardError, then the application's PaymentDeclined
// raised from it.
func renewTrace(cardMessage string) string {
	return raised("stripe.error.CardError: Request {req}: "+cardMessage,
		app("shop/billing/renewals.py", 64, "charge_invoice", "stripe.Invoice.pay(invoice.stripe_id, off_session=True)"),
		lib("stripe/api_resources/invoice.py", 139, "pay", "return cls._static_request("),
		lib("stripe/api_resources/abstract/api_resource.py", 155, "_static_request", "response, api_key = requestor.request(method_, url_, params, headers)"),
		lib("stripe/api_requestor.py", 122, "request", "resp = self.interpret_response(rbody, rcode, rheaders)"),
		lib("stripe/api_requestor.py", 399, "interpret_response", "self.handle_error_response(rbody, rcode, resp.data, rheaders)"),
		lib("stripe/api_requestor.py", 159, "handle_error_response", "raise err"),
	) + directCause + py(
		app("shop/tasks/subscriptions.py", 45, "renew", "renewals.charge_invoice(subscription, invoice)"),
		app("shop/billing/renewals.py", 70, "charge_invoice", "raise PaymentDeclined.from_card_error(err, subscription=subscription, invoice=invoice) from err"),
	)
}

// softLimitFrames are where the soft time limit interrupted a report:
// fetching rows, building model instances, or converting a value.
var softLimitFrames = []string{
	lib("django/db/models/query.py", 516, "_iterator", "yield from iterable") +
		lib("django/db/models/query.py", 91, "__iter__", "results = compiler.execute_sql(") +
		lib("django/db/models/sql/compiler.py", 2084, "cursor_iter", "for rows in iter((lambda: cursor.fetchmany(itersize)), sentinel):") +
		lib("django/db/models/sql/compiler.py", 2084, "<lambda>", "for rows in iter((lambda: cursor.fetchmany(itersize)), sentinel):") +
		lib("django/db/utils.py", 98, "inner", "return func(*args, **kwargs)"),
	lib("django/db/models/query.py", 516, "_iterator", "yield from iterable") +
		lib("django/db/models/query.py", 122, "__iter__", "obj = model_cls.from_db(") +
		lib("django/db/models/base.py", 582, "from_db", "new = cls(*values)") +
		lib("django/db/models/base.py", 543, "__init__", "_setattr(self, field.attname, val)"),
	lib("django/db/models/query.py", 516, "_iterator", "yield from iterable") +
		lib("django/db/models/query.py", 108, "__iter__", "for row in compiler.results_iter(results):") +
		lib("django/db/models/sql/compiler.py", 1512, "apply_converters", "value = converter(value, expression, connection)") +
		lib("django/db/backends/postgresql/operations.py", 330, "convert_datetimefield_value", "value = timezone.make_aware(value, self.connection.timezone)"),
}

// ---------------------------------------------------------------------
// Values.

const (
	alnum     = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	// Kubernetes' alphabet for pod and ReplicaSet hash suffixes.
	kubeAlnum = "bcdfghjklmnpqrstvwxz2456789"
	lowerHex  = "0123456789abcdef"
)

// values are the per-letter values templates refer to by name (set in
// init: some draw others through the letter).
var values map[string]func(l *letter) string

func init() { values = valueTable() }

func valueTable() map[string]func(l *letter) string {
	return map[string]func(l *letter) string{
		// Stripe ids.
		"req":  func(l *letter) string { return "req_" + l.chars(alnum, 14) },
		"cus":  func(l *letter) string { return "cus_" + l.chars(alnum, 14) },
		"ch":   func(l *letter) string { return "ch_3" + l.chars(alnum, 23) },
		"pi":   func(l *letter) string { return "pi_3" + l.chars(alnum, 23) },
		"sub":  func(l *letter) string { return "sub_1" + l.chars(alnum, 23) },
		"inv":  func(l *letter) string { return "in_1" + l.chars(alnum, 23) },
		"acct": func(l *letter) string { return "acct_1" + l.chars(alnum, 15) },
		// The shop's order ids are ULIDs, made minutes to days before.
		"ord": func(l *letter) string {
			return "ord_" + l.ulid(l.at.Add(-time.Duration(l.r.Int64N(int64(72*time.Hour)))))
		},
		"orderno": func(l *letter) string { return strconv.Itoa(8_100_000 + l.r.IntN(400_000)) },
		"email": func(l *letter) string {
			return l.pick("maria.garcia", "james.smith", "li.wei", "fatima.khan", "lukas.muller", "sofia.rossi", "noah.johnson", "amara.okafor", "yuki.tanaka", "olivia.brown", "mateo.silva", "chloe.martin") +
				strconv.Itoa(l.r.IntN(100)) + "@" + l.pick("gmail.com", "outlook.com", "yahoo.co.uk", "proton.me", "icloud.com", "acme-corp.com", "web.de")
		},
		"gsmtp": func(l *letter) string {
			// Gmail's queue id, as in "d9443c01a7336-1f6e3b1c2d5si1234567plb.123 - gsmtp".
			return l.chars(lowerHex, 13) + "-" + l.chars(lowerHex, 11) + "si" + l.chars("0123456789", 7) + l.chars("abcdefghijklmnopqrstuvwxyz", 3) + "." + strconv.Itoa(100+l.r.IntN(800))
		},
		"uuid": func(l *letter) string { return l.uuid() },
		"uuidupper": func(l *letter) string {
			return strings.ToUpper(l.uuid())
		},
		"hexaddr": func(l *letter) string { return "0x7f" + l.chars(lowerHex, 10) },
		"sku":     func(l *letter) string { return fmt.Sprintf("SKU-%05d", 1000+l.r.IntN(90000)) },
		"qty":     func(l *letter) string { return strconv.Itoa(1 + l.r.IntN(6)) },
		"avail": func(l *letter) string {
			q, _ := strconv.Atoi(l.get("qty"))
			return strconv.Itoa(l.r.IntN(q))
		},
		"warehouse":   func(l *letter) string { return l.pick("rotterdam", "leipzig", "reno", "memphis") },
		"badcurrency": func(l *letter) string { return l.pick("XBT", "DOGE", "ZWL", "VES") },
		"currency":    func(l *letter) string { return l.pick("EUR", "USD", "GBP", "CHF", "JPY", "SEK") },
		"badqty":      func(l *letter) string { return l.pick("'N/A'", "''", "'12.5'", "'TBD'", "'n/a'") },
		"pid":         func(l *letter) string { return strconv.Itoa(1000 + l.r.IntN(60000)) },
		"pid2":        func(l *letter) string { return strconv.Itoa(1000 + l.r.IntN(60000)) },
		"txid":        func(l *letter) string { return strconv.Itoa(48_000_000 + l.r.IntN(3_000_000)) },
		"txid2": func(l *letter) string {
			t, _ := strconv.Atoi(l.get("txid"))
			return strconv.Itoa(t + 1 + l.r.IntN(40))
		},
		"block": func(l *letter) string { return strconv.Itoa(l.r.IntN(2400)) },
		"slot":  func(l *letter) string { return strconv.Itoa(1 + l.r.IntN(60)) },
		"job":   func(l *letter) string { return strconv.Itoa(1 + l.r.IntN(60000)) },
		"redisip": func(l *letter) string {
			return l.pick("10.0.3.7", "10.0.3.8", "10.0.3.9")
		},
		"ledgerip": func(l *letter) string { return l.pick("10.1.2.3", "10.1.2.14", "10.1.5.7", "10.1.5.22") },
		"whhost": func(l *letter) string {
			return l.pick("hooks.acme-shop.com", "api.brightlane.io", "webhooks.northwind.dev", "hooks.zapier.com", "integrations.globex.net", "n8n.pixelforge.app", "erp.contoso-retail.com")
		},
		"region":   func(l *letter) string { return l.pick("eu-west-1", "eu-west-1", "us-east-1") },
		"session":  func(l *letter) string { return strconv.FormatInt(l.at.Unix()-l.r.Int64N(3600), 10) },
		"datepath": func(l *letter) string { return l.at.Format("2006/01/02") },
		"tmpdir":   func(l *letter) string { return l.chars("abcdefghijklmnopqrstuvwxyz0123456789_", 8) },
		"imgext":   func(l *letter) string { return l.pick("heic", "heic", "avif") },
		"crmid":    func(l *letter) string { return strconv.Itoa(10_000_000 + l.r.IntN(90_000_000)) },
		"jwt":      func(l *letter) string { return l.jwt() },
		"points":   func(l *letter) string { return strconv.Itoa(10 * (1 + l.r.IntN(50))) },
		"userid":   func(l *letter) string { return strconv.Itoa(1000 + l.r.IntN(400000)) },
		"pod": func(l *letter) string {
			// The ReplicaSet hash changes with each release; six replicas.
			h := hashOf("orders-worker", l.rel)
			return "orders-worker-" + hashChars(h, kubeAlnum, 9) + "-" + hashChars(h+uint64(1+l.r.IntN(6)), kubeAlnum, 5)
		},
		"held": func(l *letter) string { return fmt.Sprintf("%.2f", 30+l.r.Float64()*4) },
		"acquired": func(l *letter) string {
			held, _ := strconv.ParseFloat(l.get("held"), 64)
			return l.at.Add(-time.Duration(held * float64(time.Second))).Format("2006-01-02T15:04:05.000000-07:00")
		},
		"taxwait":   func(l *letter) string { return fmt.Sprintf("%.2f", 30+l.r.Float64()*0.12) },
		"yesterday": func(l *letter) string { return l.at.AddDate(0, 0, -1).Format("2006-01-02") },
		"entryid":   func(l *letter) string { return strconv.Itoa(18_000_000 + l.r.IntN(900_000)) },
		"len":       func(l *letter) string { return strconv.Itoa(l.r.IntN(4)) },
		"idx": func(l *letter) string {
			n, _ := strconv.Atoi(l.get("len"))
			return strconv.Itoa(n + l.r.IntN(3))
		},
		"idxhex": func(l *letter) string { n, _ := strconv.Atoi(l.get("idx")); return fmt.Sprintf("0x%x", n) },
		"lenhex": func(l *letter) string { n, _ := strconv.Atoi(l.get("len")); return fmt.Sprintf("0x%x", n) },
		"keylen": func(l *letter) string { return fmt.Sprintf("0x%x", 20+l.r.IntN(30)) },
		"goroutine": func(l *letter) string {
			return strconv.Itoa(40 + l.r.IntN(9000))
		},
		"goroutine2":  func(l *letter) string { return strconv.Itoa(20 + l.r.IntN(60)) },
		"devicetoken": func(l *letter) string { return l.chars(lowerHex, 64) },
		"msgid": func(l *letter) string {
			return strconv.FormatInt(10_000_000_000_000_000+l.r.Int64N(9_000_000_000_000_000), 10)
		},
		"eventb64": func(l *letter) string {
			// The producer's event, total_cents as a string: the bug.
			ev := fmt.Sprintf(`{"type":"order.paid","order_id":"%s","total_cents":"%d","currency":"%s","emitted_at":"%s"}`,
				l.get("ord"), 500+l.r.IntN(50000), l.get("currency"), l.at.Add(-time.Duration(l.r.IntN(5000))*time.Millisecond).Format(time.RFC3339Nano))
			return base64.StdEncoding.EncodeToString([]byte(ev))
		},
		"softlimitframes": func(l *letter) string { return l.render(softLimitFrames[l.r.IntN(len(softLimitFrames))]) },
	}
}

// ---------------------------------------------------------------------
// Letters.

// letter is one dead letter being made.
type letter struct {
	f    *failure
	r    *rand.Rand
	at   time.Time
	rel  int // index of the release running
	py   pyFleet
	arch goArch
	vals map[string]string
}

// pyFleet is where a Python worker runs, which decides its paths.
type pyFleet struct{ app, site, std string }

// pyFleetFor: the Kubernetes image (most letters) or the VMs of the batch
// fleet, deployed Capistrano-style into a directory per release.
func pyFleetFor(r *rand.Rand, rel int) pyFleet {
	if r.IntN(10) < 7 {
		return pyFleet{app: "/app", site: "/usr/local/lib/python3.10/site-packages", std: "/usr/local/lib/python3.10"}
	}
	return pyFleet{
		app:  "/srv/shop/releases/" + releases[rel].Format("20060102150405"),
		site: "/srv/shop/shared/venv/lib/python3.10/site-packages",
		std:  "/usr/lib/python3.10",
	}
}

// goArch is one of the two Go builds of each release: amd64 from the CI
// runner, arm64 from the Docker builder. Their paths and offsets differ.
type goArch struct{ name, src, mod, root string }

var goArches = []goArch{
	{name: "amd64", src: "/home/ci/build/shop-workers", mod: "/home/ci/go/pkg/mod", root: "/opt/hostedtoolcache/go/1.22.5/x64"},
	{name: "arm64", src: "/src", mod: "/go/pkg/mod", root: "/usr/local/go"},
}

func newLetter(f *failure, r *rand.Rand, t time.Time) *letter {
	rel := 0
	for i, rt := range releases {
		if !t.Before(rt) {
			rel = i
		}
	}
	return &letter{f: f, r: r, at: t, rel: rel, py: pyFleetFor(r, rel), arch: goArches[r.IntN(len(goArches))], vals: map[string]string{}}
}

// get returns the letter's value of name, drawing it the first time.
func (l *letter) get(name string) string {
	if v, ok := l.vals[name]; ok {
		return v
	}
	var v string
	switch name {
	case "class":
		v = l.f.class
	case "message":
		v = l.render(l.f.message)
	case "app":
		v = l.py.app
	case "site":
		v = l.py.site
	case "std":
		v = l.py.std
	case "gosrc":
		v = l.arch.src
	case "gomod":
		v = l.arch.mod
	case "goroot":
		v = l.arch.root
	default:
		draw, ok := values[name]
		if !ok {
			panic(fmt.Sprintf("failure %s: unknown placeholder {%s}", l.f.label, name))
		}
		v = draw(l)
	}
	l.vals[name] = v
	return v
}

var (
	placeholder = regexp.MustCompile(`\{([a-z][a-z0-9]*)(?::([a-z0-9]+))?\}`)
	// sourceFile finds the application file a {L:n} belongs to, in
	// `File "{app}/shop/x.py", line {L:n}` or `{gosrc}/internal/x.go:{L:n}`.
	sourceFile = regexp.MustCompile(`([\w./-]+\.(?:py|go))(?:", line |:)\{L:\d+\}`)
)

// render fills a template, one line at a time (a line's {L:n} and {off}
// depend on the file it names).
func (l *letter) render(tmpl string) string {
	lines := strings.Split(tmpl, "\n")
	for i, line := range lines {
		file := ""
		if m := sourceFile.FindStringSubmatch(line); m != nil {
			file = m[1]
		}
		lines[i] = placeholder.ReplaceAllStringFunc(line, func(ph string) string {
			m := placeholder.FindStringSubmatch(ph)
			name, arg := m[1], m[2]
			switch {
			case name == "ptr":
				return fmt.Sprintf("0xc000%06x", l.r.IntN(1<<24)&^7)
			case name == "off":
				return fmt.Sprintf("0x%x", 0x1d+hashOf(l.arch.name, l.rel, line)%0x5e0)
			case name == "roff":
				return fmt.Sprintf("0x%x", 0x1d+hashOf(l.arch.name, line)%0x3e0)
			case name == "b":
				return fmt.Sprintf("0x%x", 0x1000000+hashOf(l.arch.name, l.rel, arg)%0xf00000&^0x1f)
			case arg != "":
				panic(fmt.Sprintf("failure %s: unknown placeholder %s", l.f.label, ph))
			}
			return l.get(name)
		})
		lines[i] = lineRef.ReplaceAllStringFunc(lines[i], func(ph string) string {
			if file == "" {
				panic(fmt.Sprintf("failure %s: %s without a file on line %q", l.f.label, ph, line))
			}
			n, _ := strconv.Atoi(lineRef.FindStringSubmatch(ph)[1])
			return strconv.Itoa(shifted(l.rel, strings.TrimPrefix(file, "/"), n))
		})
	}
	return strings.Join(lines, "\n")
}

var lineRef = regexp.MustCompile(`\{L:(\d+)\}`)

// shifted is line n of an application file as of release rel: each release
// edits some files, adding or removing a few lines at one point, which
// moves the lines below it.
func shifted(rel int, file string, n int) int {
	for i := 1; i <= rel; i++ {
		h := hashOf("edit", i, file)
		if h%10 >= 7 { // this release left the file alone
			continue
		}
		at := int(h/10%240) + 1
		delta := int(h/2400%17) - 5 // -5..11
		if delta == 0 {
			delta = 3
		}
		if n > at {
			n = max(n+delta, at+1)
		}
	}
	return n
}

// hashOf hashes its arguments into a number that stands for one build's
// or one release's choice.
func hashOf(parts ...any) uint64 {
	s := sha256.Sum256([]byte(fmt.Sprint(parts...)))
	return binary.BigEndian.Uint64(s[:8])
}

func hashChars(h uint64, alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[h%uint64(len(alphabet))]
		h = h/uint64(len(alphabet)) ^ (h << 7)
	}
	return string(b)
}

func (l *letter) chars(alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[l.r.IntN(len(alphabet))]
	}
	return string(b)
}

func (l *letter) pick(choices ...string) string { return choices[l.r.IntN(len(choices))] }

func (l *letter) uuid() string {
	a, b := l.r.Uint64(), l.r.Uint64()
	return fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", a>>32, a>>16&0xffff, a&0xfff, b>>48&0x3fff|0x8000, b&0xffffffffffff)
}

// ulid is a ULID made at t: 48 bits of milliseconds, 80 random bits.
func (l *letter) ulid(t time.Time) string {
	ms := uint64(t.UnixMilli())
	b := make([]byte, 26)
	for i := 9; i >= 0; i-- {
		b[i] = crockford[ms&31]
		ms >>= 5
	}
	for i := 10; i < 26; i++ {
		b[i] = crockford[l.r.IntN(32)]
	}
	return string(b)
}

// jwt is an RS256 access token the CRM's auth server issued shortly
// before the letter failed.
func (l *letter) jwt() string {
	enc := base64.RawURLEncoding
	iat := l.at.Add(-time.Duration(l.r.IntN(3000)) * time.Second).Unix()
	header := `{"alg":"RS256","kid":"crm-2026-02","typ":"JWT"}`
	claims := fmt.Sprintf(`{"iss":"https://auth.crm-partner.com","sub":"svc-shop-sync","aud":"crm-api","scope":"contacts.write","iat":%d,"exp":%d,"jti":"%s"}`,
		iat, iat+3600, l.uuid())
	sig := make([]byte, 256)
	for i := range sig {
		sig[i] = byte(l.r.IntN(256))
	}
	return enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(claims)) + "." + enc.EncodeToString(sig)
}

// times draws the failure times of f's letters.
func times(f *failure, r *rand.Rand) []time.Time {
	w := f.when
	ts := make([]time.Time, 0, f.weight)
	if w.daily == 0 {
		span := w.until.Sub(w.from)
		for range f.weight {
			ts = append(ts, w.from.Add(time.Duration(r.Int64N(int64(span)))))
		}
		return ts
	}
	var starts []time.Time
	for d := w.from.Truncate(24 * time.Hour); d.Before(w.until); d = d.Add(24 * time.Hour) {
		if s := d.Add(w.daily); !s.Before(w.from) && s.Add(w.span).Before(w.until) {
			starts = append(starts, s)
		}
	}
	for range f.weight {
		s := starts[r.IntN(len(starts))]
		ts = append(ts, s.Add(time.Duration(r.Int64N(int64(w.span)))))
	}
	return ts
}

// output is one line of the corpus.
type output struct {
	Failure   string `json:"failure"`
	Task      string `json:"task"`
	Class     string `json:"class"`
	Message   string `json:"message"`
	Traceback string `json:"traceback"`
}

func main() {
	stats := flag.Bool("stats", false, "list each failure's letters on stderr")
	flag.Parse()

	r := rand.New(rand.NewPCG(seed1, seed2))
	type dated struct {
		at  time.Time
		out output
	}
	var all []dated
	seen := map[string]bool{}
	for i := range failures {
		f := &failures[i]
		if seen[f.label] {
			panic("duplicate label " + f.label)
		}
		seen[f.label] = true
		for _, t := range times(f, r) {
			l := newLetter(f, r, t)
			o := output{Failure: f.label, Task: f.task, Class: f.class, Message: l.get("message")}
			if f.trace != "" {
				o.Traceback = l.render(f.trace)
			}
			all = append(all, dated{t, o})
		}
	}
	slices.SortStableFunc(all, func(a, b dated) int { return a.at.Compare(b.at) })

	w := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, d := range all {
		if err := enc.Encode(d.out); err != nil {
			panic(err)
		}
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *stats {
		fs := slices.Clone(failures)
		slices.SortStableFunc(fs, func(a, b failure) int { return cmp.Compare(b.weight, a.weight) })
		for _, f := range fs {
			fmt.Fprintf(os.Stderr, "%4d  %-36s %s\n", f.weight, f.label, f.task)
		}
		fmt.Fprintf(os.Stderr, "%d letters, %d failures\n", len(all), len(failures))
	}
}
