package letterpack_test

import (
	"strings"
	"testing"

	"github.com/redrive/redrive/store/letterpack"
)

const charge = `Traceback (most recent call last):
  File "/srv/app/shop/tasks/payments.py", line 57, in charge
    intent = gateway.charge(order, amount=amount, currency=currency)
  File "/srv/app/shop/billing/gateway.py", line 131, in charge
    raise PaymentDeclined.from_card_error(err, order_id=order_id) from err
stripe._error.CardError: Request req_263d971afe891: Your card has expired.

The above exception was the direct cause of the following exception:

PaymentDeclined: `

// TestPackSharesATemplateBetweenOccurrences: two letters of one failure,
// with their own ids in the cause and in the message, share a template, and
// each reads back as it was written.
func TestPackSharesATemplateBetweenOccurrences(t *testing.T) {
	t.Parallel()
	msg1 := "card ending 6596 declined for order ORD-156498 (expired_card)"
	msg2 := "card ending 1234 declined for order ORD-999001 (expired_card)"
	tb1 := charge + msg1
	tb2 := strings.Replace(charge, "req_263d971afe891", "req_aa01bc77de412", 1) + msg2
	p1, ok1 := letterpack.Pack(tb1, msg1)
	p2, ok2 := letterpack.Pack(tb2, msg2)
	if !ok1 || !ok2 {
		t.Fatalf("not packed: %v %v", ok1, ok2)
	}
	if p1.Template != p2.Template || string(p1.Hash) != string(p2.Hash) {
		t.Errorf("one failure, two templates:\n%q\n%q", p1.Template, p2.Template)
	}
	// Line numbers of three digits or more are values too, so a deploy that
	// shifts them keeps the template; the message is never among them.
	if p1.Values != "131\x01req_263d971afe891" || p2.Values != "131\x01req_aa01bc77de412" {
		t.Errorf("values = %q, %q; want the line number and the request id", p1.Values, p2.Values)
	}
	if got := letterpack.Unpack(p1.Template, p1.Values, msg1); got != tb1 {
		t.Errorf("unpacked:\n%s\nwant:\n%s", got, tb1)
	}
	if got := letterpack.Unpack(p2.Template, p2.Values, msg2); got != tb2 {
		t.Errorf("unpacked:\n%s\nwant:\n%s", got, tb2)
	}
	// Another failure is another template.
	p3, _ := letterpack.Pack(strings.Replace(tb1, "in charge", "in refund", 1), msg1)
	if p3.Template == p1.Template {
		t.Error("a traceback with another frame shares the template")
	}
}

func TestPackStoresWholeWhatItCannotMark(t *testing.T) {
	t.Parallel()
	for _, tb := range []string{"", "a\x01b", "x\x02"} {
		if _, ok := letterpack.Pack(tb, "boom"); ok {
			t.Errorf("Pack(%q) packed it", tb)
		}
	}
}

// FuzzPackRoundTrip: whatever is packed reads back byte for byte.
func FuzzPackRoundTrip(f *testing.F) {
	f.Add(charge+"card 1234 declined", "card 1234 declined")
	f.Add("panic: runtime error: index out of range [5] with length 3\n\ngoroutine 1 [running]:\nmain.main()\n\t/app/main.go:12 +0x1d", "runtime error: index out of range [5] with length 3")
	f.Add("ORD-1234ORD-1234 ünïcode 12345", "ORD-1234")
	f.Add("msg msg", "msg")
	f.Fuzz(func(t *testing.T, tb, msg string) {
		p, ok := letterpack.Pack(tb, msg)
		if !ok {
			return
		}
		if got := letterpack.Unpack(p.Template, p.Values, msg); got != tb {
			t.Fatalf("Pack(%q, %q) = %+v, reads back %q", tb, msg, p, got)
		}
		if strings.Count(p.Template, "\x02") > 1 {
			t.Fatalf("template %q marks the message twice", p.Template)
		}
	})
}

// BenchmarkPack is what packing costs the worker per letter it
// dead-letters: a Python traceback of about 500 bytes with a chained cause.
func BenchmarkPack(b *testing.B) {
	msg := "card ending 6596 declined for order ORD-156498 (expired_card)"
	tb := charge + msg
	b.SetBytes(int64(len(tb)))
	for b.Loop() {
		letterpack.Pack(tb, msg) // b.Loop keeps the call
	}
}
