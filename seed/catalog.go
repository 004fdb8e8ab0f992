package seed

import (
	"fmt"
	"strings"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/worker/demo"
)

// The catalog: the tasks and the ways they fail that DeadLetters draws
// from. Templates refer to per-letter random values as {name} (see
// values). Each letter is grouped from its own message and traceback
// (package grouping), so a failure's message template may use values that
// vary (ids, amounts, hosts, addresses) but not in place of the words that
// tell one failure from another; TestCatalog checks that every failure of
// the catalog is exactly one group. Args, kwargs, tracebacks and the lines
// after a message's first may use anything.

// task is a task as a producer enqueues it. Its name is one of the demo's
// shop tasks, so that `redrive dev` runs a seeded letter when it is
// replayed.
type task struct {
	name, queue    string
	maxAttempts    int
	args, kwargs   string // JSON templates
	idempotencyKey string // template; "" for none
	frames         string // the task's own traceback frames, below the worker's
}

// failure is one way a task fails: one error class and message template,
// one reason, one fingerprint.
type failure struct {
	task, class, message string
	reason               dlq.Reason
	weight               int    // relative frequency
	trace                string // traceback frames below the task's; "" for none (lease expired)
	cause                string // frames and exception line of a chained cause, printed first
	kwargs               string // overrides the task's kwargs template when set
	// A failure with burstSpan > 0 is an incident: all its letters failed
	// between burstAgo and burstAgo - burstSpan before now.
	burstAgo, burstSpan time.Duration
}

// The deploy that introduced the reports.generate KeyError; letters after it
// carry the new worker version (see releases).
const deployAgo = 20 * time.Hour

// frame renders one Python traceback frame.
func frame(file string, line int, fn, code string) string {
	return fmt.Sprintf("  File %q, line %d, in %s\n    %s\n", file, line, fn, code)
}

// libFrame is a frame in a third-party package of the worker's virtualenv.
func libFrame(path string, line int, fn, code string) string {
	return frame("/srv/app/.venv/lib/python3.12/site-packages/"+path, line, fn, code)
}

// appFrame is a frame in the application's own code.
func appFrame(path string, line int, fn, code string) string {
	return frame("/srv/app/"+path, line, fn, code)
}

func frames(fs ...string) string { return strings.Join(fs, "") }

// cardError is the Stripe exception a PaymentDeclined is raised from, as
// Python prints a chained cause: its own frames and exception line.
func cardError(msg string) string {
	return stripeChargeFrames + "stripe._error.CardError: Request {request}: " + msg
}

var (
	runnerFrame = libFrame("redrive_worker/runner.py", 231, "run_job", "result = handler(*job.args, **job.kwargs)")

	stripeFrames = frames(
		libFrame("stripe/_api_resource.py", 143, "_static_request", "return requestor.request(method_, url_, params=params, options=options)"),
		libFrame("stripe/_api_requestor.py", 198, "request", "resp = requestor._interpret_response(rbody, rcode, rheaders, api_mode)"),
		libFrame("stripe/_api_requestor.py", 744, "_interpret_response", "self.handle_error_response(rbody, rcode, resp.data, rheaders, api_mode)"),
		libFrame("stripe/_api_requestor.py", 281, "handle_error_response", "raise err"),
	)
	stripeChargeFrames = frames(
		appFrame("shop/billing/gateway.py", 118, "charge", "intent = stripe.PaymentIntent.create(**params)"),
		stripeFrames,
	)
	pgConnectFrames = frames(
		appFrame("shop/db.py", 41, "transaction", "conn = pool.getconn()"),
		libFrame("psycopg2/pool.py", 169, "getconn", "return self._getconn(key)"),
		libFrame("psycopg2/pool.py", 93, "_getconn", "return self._connect(key)"),
		libFrame("psycopg2/pool.py", 63, "_connect", "conn = psycopg2.connect(*self._args, **self._kwargs)"),
		libFrame("psycopg2/__init__.py", 122, "connect", "conn = _connect(dsn, connection_factory=connection_factory, **kwasync)"),
	)
	requestsFrames = frames(
		libFrame("requests/sessions.py", 589, "request", "resp = self.send(prep, **send_kwargs)"),
		libFrame("requests/sessions.py", 703, "send", "r = adapter.send(request, **kwargs)"),
	)
	botoFrames = frames(
		libFrame("botocore/client.py", 565, "_api_call", "return self._make_api_call(operation_name, kwargs)"),
		libFrame("botocore/client.py", 1021, "_make_api_call", "raise error_class(parsed_response, operation_name)"),
	)
	smtpFrames = frames(
		appFrame("shop/mail/transport.py", 52, "send", "smtp.send_message(message)"),
		libFrame("../../smtplib.py", 986, "send_message", "return self.sendmail(from_addr, to_addrs, flatmsg, mail_options, rcpt_options)"),
	)
)

var tasks = []task{
	{name: demo.TaskCharge, queue: "payments", maxAttempts: 8,
		args:           `["{order}"]`,
		kwargs:         `{"amount": {amount}, "currency": "{currency}", "customer": "{customer}", "card_last4": "{card}", "capture": true}`,
		idempotencyKey: "charge-{order}",
		frames:         appFrame("shop/tasks/payments.py", 57, "charge", "intent = gateway.charge(order, amount=amount, currency=currency)")},
	{name: demo.TaskRefund, queue: "payments", maxAttempts: 8,
		args:           `["{order}", "{charge}"]`,
		kwargs:         `{"amount": {amount2}, "currency": "{currency}", "reason": "requested_by_customer"}`,
		idempotencyKey: "refund-{order}",
		frames:         appFrame("shop/tasks/payments.py", 103, "refund", "refund = gateway.refund(order, charge_id, amount=amount)")},
	{name: demo.TaskSendReceipt, queue: "emails", maxAttempts: 5,
		args:           `["{order}"]`,
		kwargs:         `{"to": "{email}", "template": "receipt_v3", "locale": "{locale}"}`,
		idempotencyKey: "receipt-{order}",
		frames:         appFrame("shop/tasks/emails.py", 34, "send_receipt", "mailer.send(to, render_receipt(order, locale), tags=[\"receipt\"])")},
	{name: demo.TaskSendPasswordReset, queue: "emails", maxAttempts: 5,
		args:   `[{user}]`,
		kwargs: `{"to": "{email}", "token_ttl_s": 3600}`,
		frames: appFrame("shop/tasks/emails.py", 71, "send_password_reset", "user = users.get(user_id)")},
	{name: demo.TaskReserveInventory, queue: "default", maxAttempts: 5,
		args:           `["{order}"]`,
		kwargs:         `{"sku": "{sku}", "quantity": {qty}, "warehouse": "{warehouse}"}`,
		idempotencyKey: "reserve-{order}-{sku}",
		frames:         appFrame("shop/tasks/inventory.py", 22, "reserve", "stock.reserve(sku, quantity, warehouse=warehouse, order_id=order_id)")},
	{name: demo.TaskDeliverWebhook, queue: "webhooks", maxAttempts: 10,
		args:           `["{uuid}"]`,
		kwargs:         `{"endpoint": "https://{whhost}/webhooks/redrive", "event": "{event}", "timeout_s": 10}`,
		idempotencyKey: "deliver-{uuid}",
		frames: frames(
			appFrame("shop/tasks/webhooks.py", 48, "deliver", "response = session.post(endpoint, json=payload, timeout=timeout_s, headers=signed_headers(payload))"),
			libFrame("requests/sessions.py", 637, "post", "return self.request(\"POST\", url, data=data, json=json, **kwargs)"),
		)},
	{name: demo.TaskGenerateReport, queue: "default", maxAttempts: 3,
		args:   `["monthly_revenue"]`,
		kwargs: `{"account_id": {account}, "period": "{period}", "format": "pdf"}`,
		frames: appFrame("shop/tasks/reports.py", 40, "generate", "rows = builder.collect(account_id, period)")},
	{name: demo.TaskSyncCRM, queue: "default", maxAttempts: 6,
		args:   `[{user}]`,
		kwargs: `{"email": "{email}", "crm": "hubspot", "crm_id": "{crmid}"}`,
		frames: appFrame("shop/tasks/crm.py", 29, "sync_crm", "crm.upsert_contact(contact_from_user(user))")},
	{name: demo.TaskIndexProduct, queue: "default", maxAttempts: 5,
		args:   `[{product}]`,
		kwargs: `{"index": "products_v7", "refresh": false}`,
		frames: appFrame("shop/tasks/search.py", 18, "index_product", "es.index(index=index, id=str(product.id), document=product.to_document())")},
	{name: demo.TaskGenerateThumbnails, queue: "default", maxAttempts: 4,
		args:   `["{uuid}"]`,
		kwargs: `{"sizes": [64, 256, 1024], "format": "webp"}`,
		frames: appFrame("shop/tasks/media.py", 36, "generate_thumbnails", "source = storage.open_upload(upload_id)")},
}

// Incidents: several kinds of the same outage share a window.
const (
	dbFailoverAgo, dbFailoverSpan = 76 * time.Hour, 40 * time.Minute
	diskFullAgo, diskFullSpan     = 6*24*time.Hour + 5*time.Hour, 3 * time.Hour
	smtpRotateAgo, smtpRotateSpan = 9*24*time.Hour + 2*time.Hour, 2 * time.Hour
)

var failures = []failure{
	// payments.charge
	{task: demo.TaskCharge, class: "PaymentDeclined", reason: dlq.ReasonPermanent, weight: 70,
		message: "card ending {card} declined for order {order} (insufficient_funds)",
		cause:   cardError("Your card has insufficient funds."),
		trace:   appFrame("shop/billing/gateway.py", 131, "charge", "raise PaymentDeclined.from_card_error(err, order_id=order_id) from err")},
	{task: demo.TaskCharge, class: "PaymentDeclined", reason: dlq.ReasonPermanent, weight: 25,
		message: "card ending {card} declined for order {order} (expired_card)",
		cause:   cardError("Your card has expired."),
		trace:   appFrame("shop/billing/gateway.py", 131, "charge", "raise PaymentDeclined.from_card_error(err, order_id=order_id) from err")},
	{task: demo.TaskCharge, class: "PaymentDeclined", reason: dlq.ReasonPermanent, weight: 15,
		message: "card ending {card} declined for order {order} (do_not_honor)",
		cause:   cardError("Your card was declined."),
		trace:   appFrame("shop/billing/gateway.py", 131, "charge", "raise PaymentDeclined.from_card_error(err, order_id=order_id) from err")},
	{task: demo.TaskCharge, class: "stripe.error.APIConnectionError", reason: dlq.ReasonExhausted, weight: 20,
		message: "Unexpected error communicating with Stripe. If this problem persists, let us know at support@stripe.com.\n\n(Network error: ReadTimeout: HTTPSConnectionPool(host='api.stripe.com', port=443): Read timed out. (read timeout=80))",
		trace:   stripeChargeFrames},
	{task: demo.TaskCharge, class: "stripe.error.IdempotencyError", reason: dlq.ReasonPermanent, weight: 8,
		message: "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than 'charge-{order}' if you meant to execute a different request.",
		trace:   stripeChargeFrames},
	{task: demo.TaskCharge, class: "GatewayTimeout", reason: dlq.ReasonExhausted, weight: 18,
		message: "charge for order {order} timed out after {ms}ms waiting for the payment gateway",
		trace:   appFrame("shop/billing/gateway.py", 140, "charge", "raise GatewayTimeout(order_id, elapsed_ms) from err")},
	{task: demo.TaskCharge, class: "psycopg2.OperationalError", reason: dlq.ReasonExhausted, weight: 12,
		message:  "server closed the connection unexpectedly\n\tThis probably means the server terminated abnormally\n\tbefore or while processing the request.",
		trace:    frames(appFrame("shop/billing/ledger.py", 66, "record_charge", "cur.execute(INSERT_LEDGER_SQL, entry)")),
		burstAgo: dbFailoverAgo, burstSpan: dbFailoverSpan},

	// payments.refund
	{task: demo.TaskRefund, class: "stripe.error.InvalidRequestError", reason: dlq.ReasonPermanent, weight: 15,
		message: "Charge {charge} has already been refunded.",
		trace:   frames(appFrame("shop/billing/gateway.py", 171, "refund", "return stripe.Refund.create(charge=charge_id, amount=cents(amount))"), stripeFrames)},
	{task: demo.TaskRefund, class: "RefundExceedsCapture", reason: dlq.ReasonPermanent, weight: 8,
		message: "refund of {amount} exceeds the {amount2} still captured on order {order}",
		trace:   appFrame("shop/billing/gateway.py", 164, "refund", "raise RefundExceedsCapture(amount, remaining, order_id)")},
	{task: demo.TaskRefund, class: "psycopg2.errors.SerializationFailure", reason: dlq.ReasonExhausted, weight: 10,
		message: "could not serialize access due to concurrent update",
		trace:   appFrame("shop/billing/ledger.py", 92, "record_refund", "cur.execute(UPDATE_BALANCE_SQL, (amount, order_id))")},

	// emails.send_receipt
	{task: demo.TaskSendReceipt, class: "smtplib.SMTPRecipientsRefused", reason: dlq.ReasonPermanent, weight: 30,
		message: "{'{email}': (550, b'5.1.1 <{email}>: Recipient address rejected: User unknown in virtual mailbox table')}",
		trace:   frames(smtpFrames, libFrame("../../smtplib.py", 901, "sendmail", "raise SMTPRecipientsRefused(senderrs)"))},
	{task: demo.TaskSendReceipt, class: "smtplib.SMTPServerDisconnected", reason: dlq.ReasonExhausted, weight: 10,
		message: "Connection unexpectedly closed",
		trace:   frames(smtpFrames, libFrame("../../smtplib.py", 405, "getreply", "raise SMTPServerDisconnected(\"Connection unexpectedly closed\")"))},
	{task: demo.TaskSendReceipt, class: "jinja2.exceptions.TemplateNotFound", reason: dlq.ReasonPermanent, weight: 6,
		message: "receipts/pt_BR/receipt_v3.html",
		kwargs:  `{"to": "{email}", "template": "receipt_v3", "locale": "pt_BR"}`,
		trace: frames(
			appFrame("shop/mail/render.py", 19, "render_receipt", "template = env.get_template(\"receipts/%s/receipt_v3.html\" % locale)"),
			libFrame("jinja2/environment.py", 1013, "get_template", "return self._load_template(name, globals)"),
			libFrame("jinja2/loaders.py", 204, "get_source", "raise TemplateNotFound(template)"),
		)},
	{task: demo.TaskSendReceipt, class: "redis.exceptions.ConnectionError", reason: dlq.ReasonExhausted, weight: 8,
		message: "Error 111 connecting to {ip}:6379. Connection refused.",
		trace: frames(
			appFrame("shop/mail/throttle.py", 27, "acquire", "allowed = self.redis.incr(key)"),
			libFrame("redis/connection.py", 363, "connect", "raise ConnectionError(self._error_message(e))"),
		)},
	{task: demo.TaskSendReceipt, class: "botocore.exceptions.ClientError", reason: dlq.ReasonExhausted, weight: 12,
		message: "An error occurred (Throttling) when calling the SendEmail operation (reached max retries: 4): Maximum sending rate exceeded.",
		trace:   frames(appFrame("shop/mail/transport.py", 88, "send_ses", "ses.send_email(**request)"), botoFrames)},

	// emails.send_password_reset
	{task: demo.TaskSendPasswordReset, class: "UserNotFound", reason: dlq.ReasonPermanent, weight: 10,
		message: "user {user} not found (deleted before the email was sent)",
		trace:   appFrame("shop/users/repo.py", 44, "get", "raise UserNotFound(user_id)")},
	{task: demo.TaskSendPasswordReset, class: "smtplib.SMTPAuthenticationError", reason: dlq.ReasonExhausted, weight: 6,
		message:  "(535, b'5.7.8 Username and Password not accepted. For more information, go to https://support.google.com/mail/?p=BadCredentials')",
		trace:    frames(appFrame("shop/mail/transport.py", 47, "connect", "smtp.login(settings.SMTP_USER, settings.SMTP_PASSWORD)"), libFrame("../../smtplib.py", 750, "login", "raise last_exception")),
		burstAgo: smtpRotateAgo, burstSpan: smtpRotateSpan},
	{task: demo.TaskSendPasswordReset, class: "botocore.exceptions.ClientError", reason: dlq.ReasonPermanent, weight: 5,
		message: "An error occurred (MessageRejected) when calling the SendEmail operation: Email address is not verified. The following identities failed the check in region EU-WEST-1: {email}",
		trace:   frames(appFrame("shop/mail/transport.py", 88, "send_ses", "ses.send_email(**request)"), botoFrames)},

	// inventory.reserve
	{task: demo.TaskReserveInventory, class: "InsufficientStock", reason: dlq.ReasonPermanent, weight: 35,
		message: "cannot reserve {qty} x {sku} for order {order}: only {left} left in warehouse '{warehouse}'",
		trace:   appFrame("shop/inventory/stock.py", 97, "reserve", "raise InsufficientStock(sku, quantity, available, order_id, warehouse)")},
	{task: demo.TaskReserveInventory, class: "SkuNotFound", reason: dlq.ReasonPermanent, weight: 8,
		message: "SKU '{sku}' does not exist (order {order})",
		trace:   appFrame("shop/inventory/stock.py", 81, "reserve", "raise SkuNotFound(sku, order_id)")},
	{task: demo.TaskReserveInventory, class: "psycopg2.errors.DeadlockDetected", reason: dlq.ReasonExhausted, weight: 14,
		message: "deadlock detected\nDETAIL:  Process {pid} waits for ShareLock on transaction {txid}; blocked by process {pid2}.\nProcess {pid2} waits for ShareLock on transaction {txid2}; blocked by process {pid}.\nHINT:  See server log for query details.\nCONTEXT:  while updating tuple (1042,{left}) in relation \"stock_levels\"",
		trace:   appFrame("shop/inventory/stock.py", 88, "reserve", "cur.execute(RESERVE_SQL, (quantity, sku, warehouse, order_id))")},
	{task: demo.TaskReserveInventory, class: "psycopg2.OperationalError", reason: dlq.ReasonExhausted, weight: 20,
		message:  "connection to server at \"{ip}\", port 5432 failed: Connection refused\n\tIs the server running on that host and accepting TCP/IP connections?",
		trace:    pgConnectFrames,
		burstAgo: dbFailoverAgo, burstSpan: dbFailoverSpan},
	{task: demo.TaskReserveInventory, class: "ConnectionRefusedError", reason: dlq.ReasonExhausted, weight: 10,
		message: "connect to {ip}:5432 refused",
		trace: frames(
			appFrame("shop/inventory/cache.py", 58, "warm", "conn = socket.create_connection((host, port), timeout=2)"),
			libFrame("../../socket.py", 852, "create_connection", "raise exceptions[0]"),
		)},

	// webhooks.deliver
	{task: demo.TaskDeliverWebhook, class: "requests.exceptions.ReadTimeout", reason: dlq.ReasonExhausted, weight: 60,
		message: "HTTPSConnectionPool(host='{whhost}', port=443): Read timed out. (read timeout=10)",
		trace:   frames(requestsFrames, libFrame("requests/adapters.py", 713, "send", "raise ReadTimeout(e, request=request)"))},
	{task: demo.TaskDeliverWebhook, class: "WebhookDeliveryError", reason: dlq.ReasonExhausted, weight: 45,
		message: "endpoint returned HTTP 503 after {ms} ms (subscription {uuid})",
		trace:   appFrame("shop/tasks/webhooks.py", 55, "deliver", "raise WebhookDeliveryError(response.status_code, elapsed_ms, subscription.id)")},
	{task: demo.TaskDeliverWebhook, class: "WebhookEndpointGone", reason: dlq.ReasonPermanent, weight: 12,
		message: "endpoint returned HTTP 410 Gone; subscription {uuid} disabled",
		trace:   appFrame("shop/tasks/webhooks.py", 52, "deliver", "raise WebhookEndpointGone(subscription.id)")},
	{task: demo.TaskDeliverWebhook, class: "requests.exceptions.SSLError", reason: dlq.ReasonExhausted, weight: 14,
		message: "HTTPSConnectionPool(host='{whhost}', port=443): Max retries exceeded with url: /webhooks/redrive (Caused by SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: certificate has expired (_ssl.c:1006)')))",
		trace:   frames(requestsFrames, libFrame("requests/adapters.py", 698, "send", "raise SSLError(e, request=request)"))},
	{task: demo.TaskDeliverWebhook, class: "requests.exceptions.ConnectionError", reason: dlq.ReasonExhausted, weight: 12,
		message: "HTTPSConnectionPool(host='{whhost}', port=443): Max retries exceeded with url: /webhooks/redrive (Caused by NameResolutionError(\"<urllib3.connection.HTTPSConnection object at {addr}>: Failed to resolve '{whhost}' ([Errno -2] Name or service not known)\"))",
		trace:   frames(requestsFrames, libFrame("requests/adapters.py", 700, "send", "raise ConnectionError(e, request=request)"))},

	// reports.generate
	{task: demo.TaskGenerateReport, class: dlq.LeaseExpiredClass, message: dlq.LeaseExpiredMessage, reason: dlq.ReasonLeaseExpired, weight: 25},
	{task: demo.TaskGenerateReport, class: "psycopg2.errors.QueryCanceled", reason: dlq.ReasonExhausted, weight: 15,
		message: "canceling statement due to statement timeout",
		trace:   appFrame("shop/reports/builder.py", 112, "collect", "cur.execute(REVENUE_BY_DAY_SQL, (account_id, start, end))")},
	{task: demo.TaskGenerateReport, class: "KeyError", reason: dlq.ReasonPermanent, weight: 18,
		message: "'region'",
		trace: frames(
			appFrame("shop/reports/builder.py", 131, "collect", "return [summarise(row) for row in rows]"),
			appFrame("shop/reports/builder.py", 74, "summarise", "region = row[\"region\"]"),
		),
		burstAgo: deployAgo, burstSpan: deployAgo},
	{task: demo.TaskGenerateReport, class: "ZeroDivisionError", reason: dlq.ReasonPermanent, weight: 5,
		message: "division by zero",
		trace:   appFrame("shop/reports/builder.py", 150, "growth", "return (current - previous) / previous")},
	{task: demo.TaskGenerateReport, class: "botocore.exceptions.ClientError", reason: dlq.ReasonPermanent, weight: 6,
		message: "An error occurred (AccessDenied) when calling the PutObject operation: Access Denied",
		trace:   frames(appFrame("shop/reports/storage.py", 31, "upload", "s3.put_object(Bucket=bucket, Key=key, Body=pdf)"), botoFrames)},

	// users.sync_crm
	{task: demo.TaskSyncCRM, class: "hubspot.crm.contacts.exceptions.ApiException", reason: dlq.ReasonExhausted, weight: 22,
		message: "(429) Reason: Too Many Requests\nHTTP response headers: HTTPHeaderDict({'Content-Type': 'application/json;charset=utf-8', 'X-HubSpot-RateLimit-Remaining': '0'})\nHTTP response body: {\"status\":\"error\",\"message\":\"You have reached your secondly limit.\",\"errorType\":\"RATE_LIMIT\"}",
		trace:   libFrame("hubspot/crm/contacts/api_client.py", 226, "_ApiClient__call_api", "raise e")},
	{task: demo.TaskSyncCRM, class: "hubspot.crm.contacts.exceptions.ApiException", reason: dlq.ReasonPermanent, weight: 10,
		message: "(409) Reason: Conflict\nHTTP response body: {\"status\":\"error\",\"message\":\"Contact already exists. Existing ID: {crmid}\",\"category\":\"CONFLICT\"}",
		trace:   libFrame("hubspot/crm/contacts/api_client.py", 226, "_ApiClient__call_api", "raise e")},
	{task: demo.TaskSyncCRM, class: "pydantic_core.ValidationError", reason: dlq.ReasonPermanent, weight: 8,
		message: "1 validation error for CrmContact\nemail\n  value is not a valid email address: The part after the @-sign is not valid. It should have a period. [type=value_error, input_value='{bademail}', input_type=str]",
		kwargs:  `{"email": "{bademail}", "crm": "hubspot", "crm_id": "{crmid}"}`,
		trace:   appFrame("shop/crm/mapping.py", 22, "contact_from_user", "return CrmContact(email=user.email, firstname=user.first_name, lastname=user.last_name)")},
	{task: demo.TaskSyncCRM, class: "requests.exceptions.ConnectTimeout", reason: dlq.ReasonExhausted, weight: 10,
		message: "HTTPSConnectionPool(host='api.hubapi.com', port=443): Max retries exceeded with url: /crm/v3/objects/contacts/{crmid} (Caused by ConnectTimeoutError(<urllib3.connection.HTTPSConnection object at {addr}>, 'Connection to api.hubapi.com timed out. (connect timeout=10)'))",
		trace:   frames(requestsFrames, libFrame("requests/adapters.py", 688, "send", "raise ConnectTimeout(e, request=request)"))},

	// search.index_product
	{task: demo.TaskIndexProduct, class: "elastic_transport.ConnectionTimeout", reason: dlq.ReasonExhausted, weight: 16,
		message: "Connection timed out: ReadTimeoutError(HTTPConnectionPool(host='es-data-2.internal', port=9200): Read timed out. (read timeout=30))",
		trace:   libFrame("elastic_transport/_transport.py", 342, "perform_request", "raise last_exception")},
	{task: demo.TaskIndexProduct, class: "elasticsearch.BadRequestError", reason: dlq.ReasonPermanent, weight: 10,
		message: "BadRequestError(400, 'document_parsing_exception', \"[1:57] failed to parse field [price] of type [scaled_float] in document with id '{product}'. Preview of field's value: 'N/A'\")",
		trace:   libFrame("elasticsearch/_sync/client/_base.py", 352, "_perform_request", "raise HTTP_EXCEPTIONS.get(meta.status, ApiError)(message=message, meta=meta, body=resp_body)")},
	{task: demo.TaskIndexProduct, class: dlq.LeaseExpiredClass, message: dlq.LeaseExpiredMessage, reason: dlq.ReasonLeaseExpired, weight: 4},

	// media.generate_thumbnails
	{task: demo.TaskGenerateThumbnails, class: "PIL.UnidentifiedImageError", reason: dlq.ReasonPermanent, weight: 12,
		message: "cannot identify image file '/var/lib/uploads/{uuid}.heic'",
		trace:   libFrame("PIL/Image.py", 3498, "open", "raise UnidentifiedImageError(msg)")},
	{task: demo.TaskGenerateThumbnails, class: dlq.LeaseExpiredClass, message: dlq.LeaseExpiredMessage, reason: dlq.ReasonLeaseExpired, weight: 14},
	{task: demo.TaskGenerateThumbnails, class: "OSError", reason: dlq.ReasonExhausted, weight: 18,
		message:  "[Errno 28] No space left on device: '/tmp/thumbs/{uuid}_1024.webp'",
		trace:    frames(appFrame("shop/media/thumbs.py", 64, "render", "image.save(path, format=\"WEBP\", quality=82)"), libFrame("PIL/Image.py", 2563, "save", "fp = builtins.open(filename, \"w+b\")")),
		burstAgo: diskFullAgo, burstSpan: diskFullSpan},
	{task: demo.TaskGenerateThumbnails, class: "botocore.exceptions.ClientError", reason: dlq.ReasonPermanent, weight: 8,
		message: "An error occurred (NoSuchKey) when calling the GetObject operation: The specified key does not exist.",
		trace:   frames(appFrame("shop/media/storage.py", 40, "open_upload", "obj = s3.get_object(Bucket=bucket, Key=key)"), botoFrames)},
}

// traceback is the failure's full traceback template, as a Python worker
// logs it: the optional chained cause, the worker's frame, the task's
// frames, the failure's own frames and the exception line.
func (k failure) traceback(t task) string {
	if k.trace == "" {
		return ""
	}
	var b strings.Builder
	if k.cause != "" {
		b.WriteString("Traceback (most recent call last):\n")
		b.WriteString(k.cause)
		b.WriteString("\n\nThe above exception was the direct cause of the following exception:\n\n")
	}
	b.WriteString("Traceback (most recent call last):\n")
	b.WriteString(runnerFrame)
	b.WriteString(t.frames)
	b.WriteString(k.trace)
	b.WriteString(k.class + ": " + k.message)
	return b.String()
}
