package postgres

import (
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
)

// BenchmarkAppendCopyText escapes what a seeded letter sends per row: a
// traceback of many lines and an attempt history's JSON.
func BenchmarkAppendCopyText(b *testing.B) {
	traceback := strings.Repeat("  File \"/app/shop/payments.py\", line 214, in charge\n    resp = client.post(url, json=body, timeout=10)\n", 12)
	history, err := dlq.Attempts{{Attempt: 1, At: time.Now(), Host: "worker-7d9f4c-x2kqp", Worker: "worker-7d9f4c-x2kqp-7",
		Class: "requests.exceptions.ReadTimeout", Message: "HTTPSConnectionPool(host='erp.contoso-retail.com', port=443): Read timed out. (read timeout=10)",
		Outcome: dlq.OutcomeRetry, RetryInMS: 14874}}.AppendJSON(nil)
	if err != nil {
		b.Fatal(err)
	}
	for range 3 {
		history = append(history, history...)
	}
	b.SetBytes(int64(len(traceback) + len(history)))
	buf := make([]byte, 0, 64<<10)
	for b.Loop() {
		buf = appendCopyText(buf[:0], traceback)
		buf = appendCopyText(buf, history)
	}
}
