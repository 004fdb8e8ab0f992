package dlq_test

import (
	"encoding/json"
	"testing"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/mask"
)

// benchLetters are shaped like the seed's: positional args, kwargs of a
// webhook, a payment (with a sensitive card_last4), a CRM sync, and a
// message that quotes the payload.
func benchLetters() []dlq.DeadLetter {
	kwargs := []string{
		`{"event": "subscription.renewed", "endpoint": "https://erp.contoso-retail.com/webhooks/redrive", "timeout_s": 10}`,
		`{"amount": 526.60, "capture": true, "currency": "CAD", "customer": "cus_a14583af531a7", "card_last4": "9898"}`,
		`{"crm": "hubspot", "email": "sofia.rossi@outlook", "crm_id": "78126462"}`,
		`{"sizes": [64, 256, 1024], "format": "webp"}`,
	}
	var out []dlq.DeadLetter
	for i := range 50 {
		out = append(out, dlq.DeadLetter{
			ID:           int64(i + 1),
			Args:         json.RawMessage(`["ORD-745955"]`),
			Kwargs:       json.RawMessage(kwargs[i%len(kwargs)]),
			ErrorMessage: "CardError: card 9898 was declined by the issuer (do_not_honor) for customer cus_a14583af531a7",
		})
	}
	return out
}

// BenchmarkMaskLetters masks a list page of 50 letters, as the list and
// its API do on every request.
func BenchmarkMaskLetters(b *testing.B) {
	m, err := mask.New(mask.DefaultKeys, nil)
	if err != nil {
		b.Fatal(err)
	}
	letters := benchLetters()
	page := make([]dlq.DeadLetter, len(letters))
	b.ReportAllocs()
	for b.Loop() {
		copy(page, letters)
		for i := range page {
			dlq.MaskLetter(m, &page[i])
		}
	}
}

// TestMaskLetterPlainArgsCheap: a letter whose arguments hold no sensitive
// key (most letters) is masked without decoding them, which used to be
// most of a list page's cost: a few allocations, not one per JSON token.
func TestMaskLetterPlainArgsCheap(t *testing.T) {
	m, err := mask.New(mask.DefaultKeys, nil)
	if err != nil {
		t.Fatal(err)
	}
	letter := dlq.DeadLetter{
		Args:         json.RawMessage(`["ORD-745955", 3, {"sizes": [64, 256, 1024], "format": "webp"}]`),
		Kwargs:       json.RawMessage(`{"event": "subscription.renewed", "endpoint": "https://erp.contoso-retail.com/webhooks/redrive", "timeout_s": 10}`),
		ErrorMessage: "TimeoutError: https://erp.contoso-retail.com/webhooks/redrive did not answer within 10s",
	}
	allocs := testing.AllocsPerRun(100, func() {
		d := letter
		dlq.MaskLetter(m, &d)
		if string(d.Kwargs) != string(letter.Kwargs) || d.ErrorMessage != letter.ErrorMessage {
			t.Fatalf("a plain letter changed: %s / %s", d.Kwargs, d.ErrorMessage)
		}
	})
	if allocs > 4 {
		t.Errorf("masking a letter with no sensitive key took %.0f allocations, want at most 4", allocs)
	}
}
