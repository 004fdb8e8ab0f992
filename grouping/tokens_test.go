package grouping

import (
	"strings"
	"testing"
)

// renderTokens shows tokens as text: a fixed token in brackets.
func renderTokens(toks []token) string {
	parts := make([]string, len(toks))
	for i, t := range toks {
		parts[i] = t.text
		if t.fixed {
			parts[i] = "[" + t.text + "]"
		}
	}
	return strings.Join(parts, " ")
}

func TestTokenize(t *testing.T) {
	for _, c := range []struct{ msg, want string }{
		// Data: ids, amounts, addresses, paths, URLs, dates, masked secrets.
		{"card ending 4242 declined for order ORD-88123 (insufficient_funds)", "card ending <*> declined for order <*> [insufficient_funds]"},
		{"No such customer: 'cus_kRglkgEDyJDKRw'", "No such customer <*>"},
		{"Error 111 connecting to payments-3.eu-west-1:6379. Connection refused.", "Error [111] connecting to <*> Connection refused"},
		{"10.11.21.122,10.11.10.1 \"GET /v2/abc/servers/detail?all_tenants=True HTTP/1.1\" status: 200 len: 1893", "<*> GET <*> status <*> len <*>"},
		{"connection from 82.252.162.81 () at Fri Jun 17 20:55:06 2005", "connection from <*> at <*>"},
		{"card ••• declined", "card <*> declined"},
		{"password ******** rejected", "password <*> rejected"},
		{"received broadcast android.intent.action.TIME_TICK", "received broadcast <*>"},
		{"updateDimmedActivatedHideSensitive overlap:false", "updateDimmedActivatedHideSensitive overlap:<*>"},
		// Codes and names that name the failure are fixed.
		{"KeyError: 'sku'", "KeyError [sku]"},
		{"[Errno 28] No space left on device: '/tmp/x.pdf'", "Errno [28] No space left on device <*>"},
		{"Worker exited prematurely: signal 9 (SIGKILL)", "Worker exited prematurely signal [9] SIGKILL"},
		{`duplicate key value violates unique constraint "orders_pkey"`, "duplicate key value violates unique constraint [orders_pkey]"},
		{"authentication failure; rhost=10.0.0.1 user=root", "authentication failure [rhost] <*> [user] root"},
		// Values that look like words.
		{"unsupported currency XBT for merchant acct_1N2b3", "unsupported currency <CODE> for merchant <*>"},
		{"payments-provider returned 503 (request_id req_beefcafe)", "payments-provider returned [503] [request_id] <*>"},
		{"refund failed: order_accepted", "refund failed [order_accepted]"},
		{"HTTPSConnectionPool(host='hooks.zapier.com', port=443): Read timed out.", "HTTPSConnectionPool [host] <*> [port] <*> Read timed out"},
		{"invalid literal for int() with base 10: 'TBD'", "invalid literal for int with base <*> TBD"},
		{"127.0.0.1:135 open through proxy proxy.example.com:5070 SOCKS5", "<*> open through proxy <*> SOCKS5"},
		{"sdpd", "[sdpd]"},
	} {
		if got := renderTokens(tokenize(c.msg)); got != c.want {
			t.Errorf("tokenize(%q)\n = %s\nwant %s", c.msg, got, c.want)
		}
	}
}

func BenchmarkTokenize(b *testing.B) {
	msg := "HTTPSConnectionPool(host='hooks.zapier.com', port=443): Max retries exceeded with url: /webhooks/redrive (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f3a2c1d9e50>: Failed to establish a new connection: [Errno 111] Connection refused'))"
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		tokenize(msg)
	}
}
