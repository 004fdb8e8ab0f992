package grouping

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// Tracebacks as their runtimes print them. Several come in pairs: the same
// failure on another machine, after a deploy that moved the code by a few
// lines, in another process.
const (
	pyOrders = `Traceback (most recent call last):
  File "/srv/app/worker/main.py", line 41, in run_job
    result = handler(**job.kwargs)
             ^^^^^^^^^^^^^^^^^^^^^
  File "/srv/app/shop/tasks.py", line 17, in charge_order
    payments.charge(order)
  File "/srv/app/shop/payments.py", line 88, in charge
    resp = self.session.post("/charges", json=body).json()
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/srv/app/.venv/lib/python3.11/site-packages/requests/models.py", line 978, in json
    raise RequestsJSONDecodeError(e.msg, e.doc, e.pos)
  File "/usr/lib/python3.11/json/decoder.py", line 355, in raw_decode
    raise JSONDecodeError("Expecting value", s, err.value) from None
requests.exceptions.JSONDecodeError: Expecting value: line 1 column 1 (char 0)
`
	// Built elsewhere, three lines moved, a newer Python with other caret lines.
	pyOrdersMoved = `Traceback (most recent call last):
  File "/home/ci/build/worker/main.py", line 44, in run_job
    result = handler(**job.kwargs)
  File "/home/ci/build/shop/tasks.py", line 17, in charge_order
    payments.charge(order)
  File "/home/ci/build/shop/payments.py", line 91, in charge
    resp = self.session.post("/charges", json=body).json()
  File "/opt/venv/lib/python3.12/site-packages/requests/models.py", line 980, in json
    raise RequestsJSONDecodeError(e.msg, e.doc, e.pos)
  File "/usr/local/lib/python3.12/json/decoder.py", line 356, in raw_decode
    raise JSONDecodeError("Expecting value", s, err.value) from None
requests.exceptions.JSONDecodeError: Expecting value: line 1 column 1 (char 0)
`
	// The same path into requests, from refund rather than charge.
	pyRefund = `Traceback (most recent call last):
  File "/srv/app/worker/main.py", line 41, in run_job
    result = handler(**job.kwargs)
  File "/srv/app/shop/tasks.py", line 23, in refund_order
    payments.refund(order)
  File "/srv/app/shop/payments.py", line 120, in refund
    resp = self.session.post("/refunds", json=body).json()
  File "/srv/app/.venv/lib/python3.11/site-packages/requests/models.py", line 978, in json
    raise RequestsJSONDecodeError(e.msg, e.doc, e.pos)
requests.exceptions.JSONDecodeError: Expecting value: line 1 column 1 (char 0)
`
	pyLibraryOnly = `Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "<frozen runpy>", line 88, in _run_code
  File "/usr/local/lib/python3.12/site-packages/celery/app/trace.py", line 453, in trace_task
    R = retval = fun(*args, **kwargs)
  File "/usr/local/lib/python3.12/site-packages/kombu/connection.py", line 556, in ensure_connection
    self._ensure_connection(*args, **kwargs)
  File "/usr/local/lib/python3.12/socket.py", line 836, in create_connection
    sock.connect(sa)
ConnectionRefusedError: [Errno 111] Connection refused
`
	pyChained = `Traceback (most recent call last):
  File "/app/shop/inventory.py", line 30, in reserve
    stock = self.cache.get(sku)
  File "/app/shop/cache.py", line 12, in get
    return self._items[key]
KeyError: 'sku-1'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/app/shop/tasks.py", line 12, in reserve_stock
    inventory.reserve(sku)
  File "/app/shop/inventory.py", line 35, in reserve
    raise OutOfStock(sku)
shop.inventory.OutOfStock: sku-1
`
	pyCause = `Traceback (most recent call last):
  File "/app/shop/cache.py", line 12, in get
    return self._items[key]
KeyError: 'sku-1'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/app/shop/tasks.py", line 12, in reserve_stock
    inventory.reserve(sku)
  File "/app/shop/inventory.py", line 35, in reserve
    raise OutOfStock(sku) from err
shop.inventory.OutOfStock: sku-1
`
	pyPackage = `Traceback (most recent call last):
  File "/app/shop/orders/__init__.py", line 7, in place
    validate(order)
  File "/app/orders_cli.py", line 3, in <module>
    main()
ValueError: bad order
`
	pyWindows = `Traceback (most recent call last):
  File "C:\deploy\shop\tasks.py", line 12, in reserve_stock
    inventory.reserve(sku)
  File "C:\Python311\Lib\json\decoder.py", line 355, in raw_decode
    raise JSONDecodeError("Expecting value", s, err.value) from None
json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)
`
	pyDistPackages = `Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/psycopg2/__init__.py", line 122, in connect
    conn = _connect(dsn, connection_factory=connection_factory, **kwasync)
psycopg2.OperationalError: could not connect to server
`
	pyRecursion = `Traceback (most recent call last):
  File "/app/shop/tree.py", line 9, in walk
    return walk(node.parent)
  File "/app/shop/tree.py", line 9, in walk
    return walk(node.parent)
  File "/app/shop/tree.py", line 9, in walk
    return walk(node.parent)
  [Previous line repeated 996 more times]
RecursionError: maximum recursion depth exceeded
`

	// The worker's recovered panic (callHandler's debug.Stack), built
	// without -trimpath on a CI machine.
	goDemoPanic = `panic: demo.panic: simulated crash for job 42

goroutine 187 [running]:
runtime/debug.Stack()
	/usr/local/go/src/runtime/debug/stack.go:26 +0x5e
github.com/redrive/redrive/worker.callHandler.func1()
	/home/ci/build/redrive/worker/executor.go:181 +0x6a
panic({0x9b6e40?, 0xc0003a2f30?})
	/usr/local/go/src/runtime/panic.go:860 +0x13a
github.com/redrive/redrive/worker/demo.(*handlers).crash(0xc0001b4010?, {0xb7f1c8?, 0xc0003a6e10?}, 0xc0002d6000)
	/home/ci/build/redrive/worker/demo/demo.go:210 +0x1d
github.com/redrive/redrive/worker.callHandler({0xb7f1c8, 0xc0003a6e10}, 0xc0001ba0f0, 0xc0002d6000)
	/home/ci/build/redrive/worker/executor.go:184 +0x7b
github.com/redrive/redrive/worker.(*Worker).runHandler.func1()
	/home/ci/build/redrive/worker/executor.go:140 +0x2f4
created by github.com/redrive/redrive/worker.(*Worker).runHandler in goroutine 12
	/home/ci/build/redrive/worker/executor.go:138 +0x1a5
`
	// The same panic from a -trimpath build, another goroutine, other
	// addresses, the code moved.
	goDemoPanicTrimmed = `panic: demo.panic: simulated crash for job 977

goroutine 4031 [running]:
runtime/debug.Stack()
	runtime/debug/stack.go:26 +0x5e
github.com/redrive/redrive/worker.callHandler.func1()
	github.com/redrive/redrive/worker/executor.go:183 +0x6a
panic({0x9c1120?, 0xc000412b80?})
	runtime/panic.go:860 +0x13a
github.com/redrive/redrive/worker/demo.(*handlers).crash(0xc000010028?, {0xb81f48?, 0xc0004a2000?}, 0xc000519000)
	github.com/redrive/redrive/worker/demo/demo.go:214 +0x21
github.com/redrive/redrive/worker.callHandler({0xb81f48, 0xc0004a2000}, 0xc0000ba3c0, 0xc000519000)
	github.com/redrive/redrive/worker/executor.go:186 +0x7b
github.com/redrive/redrive/worker.(*Worker).runHandler.func1()
	github.com/redrive/redrive/worker/executor.go:142 +0x31a
created by github.com/redrive/redrive/worker.(*Worker).runHandler in goroutine 9
	github.com/redrive/redrive/worker/executor.go:140 +0x1c5
`
	// The worker's WithTraceback format (formatFrames): one function line
	// with (...) and one file line, no offsets.
	goDemoTraced = `github.com/redrive/redrive/worker/demo.decode(...)
	/work/main/worker/demo/demo.go:70
github.com/redrive/redrive/worker/demo.(*handlers).permanent(...)
	/work/main/worker/demo/demo.go:177
github.com/redrive/redrive/worker.callHandler(...)
	/work/main/worker/executor.go:184
github.com/redrive/redrive/worker.(*Worker).runHandler.func1(...)
	/work/main/worker/executor.go:140
`
	// An application of its own on the redrive worker, its handler
	// panicking inside a third-party module no list knows.
	goAcmeUnknownLib = `panic: runtime error: index out of range [3] with length 3

goroutine 33 [running]:
runtime/debug.Stack()
	/usr/local/go/src/runtime/debug/stack.go:26 +0x5e
github.com/redrive/redrive/worker.callHandler.func1()
	/root/go/pkg/mod/github.com/redrive/redrive@v0.9.0/worker/executor.go:181 +0x6a
panic({0x8a2f40?, 0xc000120000?})
	/usr/local/go/src/runtime/panic.go:860 +0x13a
github.com/someone/fastcsv.(*Reader).readField(...)
	/root/go/pkg/mod/github.com/someone/fastcsv@v1.2.0/reader.go:210
github.com/someone/fastcsv.(*Reader).Read(0xc0001a2000)
	/root/go/pkg/mod/github.com/someone/fastcsv@v1.2.0/reader.go:150 +0x45
github.com/acme/shop/imports.parseRow(...)
	/src/imports/rows.go:27
github.com/acme/shop/imports.(*Importer).Run(0xc00011c000, {0x8a2f40, 0xc000120000})
	/src/imports/importer.go:61 +0x1b2
github.com/redrive/redrive/worker.callHandler({0xb7f1c8, 0xc0003a6e10}, 0xc0001ba0f0, 0xc0002d6000)
	/root/go/pkg/mod/github.com/redrive/redrive@v0.9.0/worker/executor.go:184 +0x7b
created by github.com/redrive/redrive/worker.(*Worker).runHandler in goroutine 12
	/root/go/pkg/mod/github.com/redrive/redrive@v0.9.0/worker/executor.go:138 +0x1a5
`
	// An unrecovered panic in a goroutine, GOTRACEBACK=all: the other
	// goroutines do not count.
	goUnrecovered = `panic: runtime error: index out of range [0] with length 0

goroutine 18 [running]:
github.com/acme/tracecheck/shop/payments.(*Client).Crash(...)
	/tmp/tracecheck/shop/payments/payments.go:21
github.com/acme/tracecheck/shop.CheckoutCrash(...)
	/tmp/tracecheck/shop/orders.go:12
main.main.func1()
	/tmp/tracecheck/crash/main.go:12 +0x45
created by main.main in goroutine 1
	/tmp/tracecheck/crash/main.go:12 +0x65

goroutine 1 [semacquire]:
sync.runtime_Semacquire(0xc000012108?)
	/usr/local/go/src/runtime/sema.go:71 +0x25
github.com/acme/tracecheck/other.Wait(...)
	/tmp/tracecheck/other/wait.go:5
main.main()
	/tmp/tracecheck/crash/main.go:13 +0x7c
exit status 2
`
	// A nil pointer in lib/pq reached through database/sql.
	goLibPanic = `panic: runtime error: invalid memory address or nil pointer dereference
[signal SIGSEGV: segmentation violation code=0x1 addr=0x18 pc=0x6a3f2b]

goroutine 7 [running]:
github.com/lib/pq.(*conn).query(0x0, {0xc0000b4000, 0x2a}, {0xc0000a6080, 0x1, 0x1})
	/root/go/pkg/mod/github.com/lib/pq@v1.12.3/conn.go:877 +0x4b
database/sql.(*DB).queryDC(0xc000124000, {0x7f4a80, 0xc000012345}, 0x0, 0xc0001b6000)
	/usr/local/go/src/database/sql/sql.go:1792 +0x2c4
github.com/acme/shop/v2/payments.(*Client).Charge[...](0xc000123456, {0x1234, 0xc0000aa000})
	/home/ci/build/payments/client.go:88 +0x1d
github.com/acme/shop/v2.Run.func1()
	/home/ci/build/run.go:41 +0x3a
created by github.com/acme/shop/v2.Run in goroutine 1
	/home/ci/build/run.go:39 +0x8f
`
	goStdlibOnly = `goroutine 21 [running]:
runtime/debug.Stack()
	/usr/local/go/src/runtime/debug/stack.go:26 +0x5e
net/http.(*conn).serve.func1()
	/usr/local/go/src/net/http/server.go:1947 +0xbe
panic({0x6b2f00?, 0x8e4f10?})
	/usr/local/go/src/runtime/panic.go:860 +0x13a
encoding/json.(*decodeState).object(0xc0001c6000, {0x6a1e40?, 0xc0000a2f00?})
	/usr/local/go/src/encoding/json/decode.go:643 +0x1f
net/http.HandlerFunc.ServeHTTP(0xc000010030, {0x7d4a50, 0xc0001d8000}, 0xc0001ba000)
	/usr/local/go/src/net/http/server.go:2220 +0x29
net/http.(*conn).serve(0xc0001b0000, {0x7d5a88, 0xc0000a2120})
	/usr/local/go/src/net/http/server.go:2092 +0x5f4
created by net/http.(*Server).Serve in goroutine 1
	/usr/local/go/src/net/http/server.go:3360 +0x485
`
	// github.com/pkg/errors' %+v: function lines without arguments.
	goPkgErrors = `card declined
github.com/acme/shop/payments.(*Client).Charge
	/home/ci/shop/payments/client.go:88
github.com/acme/shop/orders.Process
	/home/ci/shop/orders/process.go:41
runtime.goexit
	/usr/local/go/src/runtime/asm_amd64.s:1700
`

	javaCheckout = `java.lang.IllegalStateException: card declined
	at com.acme.shop.payments.StripeClient.charge(StripeClient.java:88)
	at com.acme.shop.orders.OrderService.checkout(OrderService.java:142)
	at com.acme.shop.orders.OrderService$$SpringCGLIB$$0.checkout(<generated>)
	at com.acme.shop.orders.OrderService$$Lambda/0x000001f0010a4d38.run(Unknown Source)
	at java.base/jdk.internal.reflect.DirectMethodHandleAccessor.invoke(DirectMethodHandleAccessor.java:103)
	at java.base/java.lang.reflect.Method.invoke(Method.java:580)
	at org.springframework.aop.support.AopUtils.invokeJoinpointUsingReflection(AopUtils.java:354)
	at app//com.acme.shop.jobs.CheckoutJob.run(CheckoutJob.java:31)
	at java.base/java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1144)
	at java.base/java.lang.Thread.run(Thread.java:1583)
Caused by: java.net.SocketTimeoutException: Read timed out
	at java.base/sun.nio.ch.NioSocketImpl.timedRead(NioSocketImpl.java:278)
	at com.acme.shop.payments.HttpTransport.send(HttpTransport.java:55)
	... 9 more
`
	javaCheckoutMoved = `java.lang.IllegalStateException: card declined
	at com.acme.shop.payments.StripeClient.charge(StripeClient.java:93)
	at com.acme.shop.orders.OrderService.checkout(OrderService.java:150)
	at com.acme.shop.orders.OrderService$$EnhancerBySpringCGLIB$$5a3b1c2d.checkout(<generated>)
	at com.acme.shop.orders.OrderService$$Lambda$14/0x0000000800066840.run(Unknown Source)
	at sun.reflect.NativeMethodAccessorImpl.invoke0(Native Method)
	at org.springframework.aop.support.AopUtils.invokeJoinpointUsingReflection(AopUtils.java:343)
	at com.acme.shop.jobs.CheckoutJob.run(CheckoutJob.java:29)
	at java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1149)
	at java.lang.Thread.run(Thread.java:750)
`
	javaLibraryOnly = `org.postgresql.util.PSQLException: Connection refused
	at org.postgresql.core.v3.ConnectionFactoryImpl.openConnectionImpl(ConnectionFactoryImpl.java:346)
	at org.postgresql.jdbc.PgConnection.<init>(PgConnection.java:273)
	at com.zaxxer.hikari.pool.HikariPool.createPoolEntry(HikariPool.java:477)
	at java.base/java.lang.Thread.run(Thread.java:1583)
`

	dotnetCharge = `System.InvalidOperationException: card declined
   at Acme.Shop.Payments.StripeClient.Charge(Decimal amount) in /src/Payments/StripeClient.cs:line 88
   at Acme.Shop.Orders.OrderService.<CheckoutAsync>d__4.MoveNext() in /src/Orders/OrderService.cs:line 142
   at System.Runtime.CompilerServices.AsyncMethodBuilderCore.Start[TStateMachine](TStateMachine& stateMachine)
   at Microsoft.AspNetCore.Mvc.Infrastructure.ActionMethodExecutor.Execute(ActionContext context)
`

	nodeCharge = `TypeError: Cannot read properties of undefined (reading 'amount')
    at chargeOrder (/app/src/payments/charge.js:88:13)
    at async OrderWorker.process (/app/src/workers/orders.js:41:5)
    at async Promise.all (index 0)
    at async Worker.processJob (/app/node_modules/bullmq/dist/cjs/classes/worker.js:394:28)
    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)
`
	nodeChargeMoved = `TypeError: Cannot read properties of undefined (reading 'amount')
    at chargeOrder (/home/runner/work/shop/src/payments/charge.js:91:17)
    at async OrderWorker.process (/home/runner/work/shop/src/workers/orders.js:41:5)
    at async Worker.processJob (/home/runner/work/shop/node_modules/bullmq/dist/cjs/classes/worker.js:401:28)
`
	nodeESM = `Error: stock exhausted
    at file:///srv/shop/lib/inventory.mjs:12:9
    at new Reservation (file:///srv/shop/lib/reservations.mjs:30:5)
    at Object.reserve [as run] (file:///srv/shop/jobs/reserve.mjs:7:3)
    at Module._compile (node:internal/modules/cjs/loader:1256:14)
`
	nodeLibraryOnly = `Error: connect ECONNREFUSED 127.0.0.1:5432
    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:1555:16)
    at Client._handleErrorEvent (/app/node_modules/pg/lib/client.js:336:5)
    at Connection.emit (node:events:517:28)
`

	rubyCharge = `/app/app/services/payment_gateway.rb:88:in 'Billing::PaymentGateway#charge': card declined (Billing::PaymentGateway::Declined)
	from /app/app/jobs/charge_job.rb:12:in 'block in ChargeJob#perform'
	from /usr/local/bundle/gems/activesupport-7.1.3/lib/active_support/callbacks.rb:121:in 'block in ActiveSupport::Callbacks#run_callbacks'
	from /app/app/jobs/charge_job.rb:10:in 'ChargeJob#perform'
	from /usr/local/lib/ruby/3.4.0/net/http.rb:1600:in 'Net::HTTP#request'
	from <internal:kernel>:187:in 'Kernel#loop'
`
	// Ruby before 3.4, a backtrace joined by lines, elsewhere on disk.
	rubyChargeOld = `/var/www/shop/releases/20240611/app/services/payment_gateway.rb:90:in ` + "`" + `Billing::PaymentGateway#charge'
/var/www/shop/releases/20240611/app/jobs/charge_job.rb:12:in ` + "`" + `block (2 levels) in ChargeJob#perform'
/var/www/shop/shared/bundle/ruby/3.2.0/gems/activesupport-7.1.3/lib/active_support/callbacks.rb:121:in ` + "`" + `run_callbacks'
/var/www/shop/releases/20240611/app/jobs/charge_job.rb:10:in ` + "`" + `ChargeJob#perform'
`
)

func TestPlace(t *testing.T) {
	for _, tc := range []struct {
		name, traceback string
		n               int
		want            string
	}{
		{"python", pyOrders, 3, "shop.payments.charge < shop.tasks.charge_order < worker.main.run_job"},
		{"python moved", pyOrdersMoved, 3, "shop.payments.charge < shop.tasks.charge_order < worker.main.run_job"},
		{"python n=1", pyOrders, 1, "shop.payments.charge"},
		{"python other function", pyRefund, 2, "shop.payments.refund < shop.tasks.refund_order"},
		{"python library only", pyLibraryOnly, 3, "socket.create_connection < kombu.connection.ensure_connection < celery.app.trace.trace_task"},
		{"python during handling", pyChained, 3, "shop.inventory.reserve < shop.tasks.reserve_stock"},
		{"python direct cause", pyCause, 3, "shop.inventory.reserve < shop.tasks.reserve_stock"},
		{"python package and script", pyPackage, 3, "orders_cli.<module> < shop.orders.place"},
		{"python windows", pyWindows, 2, "shop.tasks.reserve_stock"},
		{"python dist-packages", pyDistPackages, 2, "psycopg2.connect"},
		{"python recursion", pyRecursion, 3, "shop.tree.walk"},

		{"go demo panic", goDemoPanic, 3, "demo.(*handlers).crash"},
		{"go demo panic trimpath", goDemoPanicTrimmed, 3, "demo.(*handlers).crash"},
		{"go demo WithTraceback", goDemoTraced, 3, "demo.decode < demo.(*handlers).permanent"},
		{"go unknown library", goAcmeUnknownLib, 3, "imports.parseRow < imports.(*Importer).Run"},
		{"go unrecovered, GOTRACEBACK=all", goUnrecovered, 3, "payments.(*Client).Crash < shop.CheckoutCrash < main.main.func1"},
		{"go unrecovered n=4", goUnrecovered, 4, "payments.(*Client).Crash < shop.CheckoutCrash < main.main.func1 < main.main"},
		{"go library frames, major version", goLibPanic, 3, "payments.(*Client).Charge[...] < shop.Run.func1 < shop.Run"},
		{"go standard library only", goStdlibOnly, 2, "json.(*decodeState).object < http.HandlerFunc.ServeHTTP"},
		{"go pkg/errors", goPkgErrors, 3, "payments.(*Client).Charge < orders.Process"},

		{"java", javaCheckout, 3, "payments.StripeClient.charge < orders.OrderService.checkout < jobs.CheckoutJob.run"},
		{"java moved, java 8", javaCheckoutMoved, 3, "payments.StripeClient.charge < orders.OrderService.checkout < jobs.CheckoutJob.run"},
		{"java library only", javaLibraryOnly, 2, "v3.ConnectionFactoryImpl.openConnectionImpl < jdbc.PgConnection.<init>"},
		{".net", dotnetCharge, 3, "Payments.StripeClient.Charge < OrderService.<CheckoutAsync>d__4.MoveNext"},

		{"node", nodeCharge, 3, "payments.charge.chargeOrder < workers.orders.OrderWorker.process"},
		{"node moved", nodeChargeMoved, 3, "payments.charge.chargeOrder < workers.orders.OrderWorker.process"},
		{"node esm", nodeESM, 3, "inventory.<anonymous> < reservations.Reservation < jobs.reserve.Object.reserve"},
		{"node library only", nodeLibraryOnly, 3, "client.Client._handleErrorEvent"},

		{"ruby 3.4", rubyCharge, 3, "services.payment_gateway.Billing.PaymentGateway#charge < jobs.charge_job.ChargeJob#perform"},
		{"ruby 3.2", rubyChargeOld, 3, "services.payment_gateway.Billing.PaymentGateway#charge < jobs.charge_job.ChargeJob#perform"},

		// The first frame decides the format: Go frames after a JVM
		// trace (or a Ruby one) do not count.
		{"go after java", javaCheckout + goDemoPanic, 5, "payments.StripeClient.charge < orders.OrderService.checkout < jobs.CheckoutJob.run"},
		{"go after ruby", rubyCharge + goDemoPanic, 5, "services.payment_gateway.Billing.PaymentGateway#charge < jobs.charge_job.ChargeJob#perform"},
		{"java after go", goDemoPanic + javaCheckout, 5, "demo.(*handlers).crash"},

		{"empty", "", 3, ""},
		{"n=0", pyOrders, 0, ""},
		{"message only", "KeyError: 'sku'", 3, ""},
		{"unparseable", "something went wrong\n\tat some point\nline 3\n", 3, ""},
		{"header only", "Traceback (most recent call last):\n", 3, ""},
		{"goroutine header only", "goroutine 1 [running]:\n", 3, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Place(tc.traceback, tc.n); got != tc.want {
				t.Errorf("Place(n=%d) = %q, want %q", tc.n, got, tc.want)
			}
			// CRLF line ends (a traceback pasted from Windows) change nothing.
			if got := Place(strings.ReplaceAll(tc.traceback, "\n", "\r\n"), tc.n); got != tc.want {
				t.Errorf("with CRLF: Place(n=%d) = %q, want %q", tc.n, got, tc.want)
			}
		})
	}
}

// The pairs above say it once; this says it of every traceback: numbers
// that change with each run, build or deploy (line and column numbers,
// offsets, addresses and arguments, goroutine numbers) never change Place.
func TestPlaceIgnoresNumbers(t *testing.T) {
	numbers := regexp.MustCompile(`(line |:|goroutine |\[)[0-9]+|0x[0-9a-f]+`)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tb := range []string{
		pyOrders, pyRefund, pyLibraryOnly, pyChained, pyCause, pyPackage, pyWindows, pyRecursion,
		goDemoPanic, goDemoTraced, goAcmeUnknownLib, goUnrecovered, goLibPanic, goStdlibOnly, goPkgErrors,
		javaCheckout, javaLibraryOnly, dotnetCharge, nodeCharge, nodeESM, nodeLibraryOnly, rubyCharge, rubyChargeOld,
	} {
		want := Place(tb, 5)
		for range 20 {
			moved := numbers.ReplaceAllStringFunc(tb, func(m string) string {
				if strings.HasPrefix(m, "0x") {
					return fmt.Sprintf("0x%x", rng.Uint64())
				}
				i := strings.IndexFunc(m, func(r rune) bool { return '0' <= r && r <= '9' })
				return m[:i] + fmt.Sprint(rng.IntN(5000))
			})
			if got := Place(moved, 5); got != want {
				t.Fatalf("with other numbers: Place = %q, want %q\n%s", got, want, moved)
			}
		}
	}
}

// Where the code lives on disk never changes Place: the same traceback
// with other absolute prefixes.
func TestPlaceIgnoresPrefixes(t *testing.T) {
	for _, c := range []struct{ tb, from string }{
		{pyOrders, "/srv/app/"}, {goDemoPanic, "/home/ci/build/redrive/"}, {goUnrecovered, "/tmp/tracecheck/"},
		{nodeCharge, "/app/"}, {rubyCharge, "/app/"},
	} {
		want := Place(c.tb, 5)
		for _, to := range []string{"/", "/opt/deploy/releases/42/", "/home/alice/src/", "C:/build/", ""} {
			if got := Place(strings.ReplaceAll(c.tb, c.from, to), 5); got != want {
				t.Errorf("%s for %s: Place = %q, want %q", to, c.from, got, want)
			}
		}
	}
}

func TestPlaceDistinguishes(t *testing.T) {
	for _, c := range [][2]string{
		{pyOrders, pyRefund},
		{pyOrders, strings.ReplaceAll(pyOrders, "in charge\n", "in capture\n")},
		{goDemoPanic, strings.ReplaceAll(goDemoPanic, "(*handlers).crash", "(*handlers).flaky")},
		{goDemoTraced, goDemoPanic},
		{javaCheckout, strings.ReplaceAll(javaCheckout, "StripeClient.charge(", "StripeClient.refund(")},
		{nodeCharge, strings.ReplaceAll(nodeCharge, "at chargeOrder", "at refundOrder")},
		{rubyCharge, strings.ReplaceAll(rubyCharge, "#charge'", "#refund'")},
	} {
		if a, b := Place(c[0], 3), Place(c[1], 3); a == b {
			t.Errorf("two different places both gave %q", a)
		}
	}
}

func FuzzPlace(f *testing.F) {
	for _, tb := range []string{
		pyOrders, pyChained, pyWindows, goDemoPanic, goDemoTraced, goAcmeUnknownLib, goUnrecovered,
		goPkgErrors, javaCheckout, dotnetCharge, nodeCharge, nodeESM, rubyCharge, rubyChargeOld,
		"x.y(\n\t", "created by \n\t", "a:1:in '\n", "  File \"\", line , in \n", "\tat (\n",
		" at $$..0(", // javaFrame once cut a class name past its end
	} {
		f.Add(tb, 3)
	}
	f.Fuzz(func(t *testing.T, tb string, n int) {
		n %= 8
		got := Place(tb, n)
		if got != Place(tb, n) {
			t.Fatal("Place is not deterministic")
		}
		if got == "" {
			return
		}
		parts := strings.Split(got, " < ")
		if len(parts) > n {
			t.Fatalf("Place(n=%d) = %q: %d frames", n, got, len(parts))
		}
		for _, p := range parts {
			// A name never has a space (so never "line ") nor a ':'
			// (so never ":<digits>").
			if p == "" || strings.ContainsAny(p, ": \t\r\n") {
				t.Fatalf("Place = %q: frame %q", got, p)
			}
		}
		// Fewer frames asked, the same innermost ones.
		if n > 1 {
			if short := Place(tb, n-1); !strings.HasPrefix(got, short) {
				t.Fatalf("Place(n=%d) = %q, Place(n=%d) = %q", n, got, n-1, short)
			}
		}
	})
}

// typical is a 2 KB traceback of each kind.
var typical = map[string]string{
	"python": pyOrders + pyOrdersMoved[strings.Index(pyOrdersMoved, "\n")+1:],
	"go":     goDemoPanic + goDemoTraced + goDemoTraced + goDemoTraced,
	"java":   javaCheckout + javaCheckoutMoved,
	"node":   nodeCharge + nodeChargeMoved + nodeCharge + nodeESM + nodeChargeMoved,
	"ruby":   rubyCharge + rubyChargeOld + rubyCharge + rubyChargeOld,
}

func BenchmarkPlace(b *testing.B) {
	for _, kind := range []string{"python", "go", "java", "node", "ruby"} {
		tb := typical[kind]
		b.Run(fmt.Sprintf("%s_%dB", kind, len(tb)), func(b *testing.B) {
			b.SetBytes(int64(len(tb)))
			b.ReportAllocs()
			for b.Loop() {
				Place(tb, 3)
			}
		})
	}
}
