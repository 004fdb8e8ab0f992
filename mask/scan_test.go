package mask

import (
	"bytes"
	"encoding/json"
	"testing"
)

// maskScanSeeds are the shapes that matter to the scanner: whitespace
// everywhere, escapes in keys and values, what json.Marshal escapes
// (<, >, &, U+2028), invalid UTF-8, duplicate keys, deep and empty
// containers, numbers as written.
var maskScanSeeds = []string{
	`{"password":"x"}`,
	` { "a" : [ 1 , 2.50 , -0.1e+5 ] , "Token" : { "b" : [ "c" ] } , "z" : null } `,
	`{"pass\u0077ord":"hunter2","card_last4":"4242"}`,
	`{"secret":"a","secret":"b","x":"<b>&amp;</b>"}`,
	"{\"note\":\"line\\nbreak \u2028 sep\",\"ssn\":\"123\"}",
	"{\"k\\u00e9y\":\"\xff\xfe\",\"token\":\"\xff\"}",
	"{\"\xffpassword\":1}",
	`[{"authorization":{"Bearer":[1,{"x":"}"}]}},{"a":"\"quoted\" \\ back"}]`,
	`{"card":{}, "cards":[], "x":{"y":{"z":{"secret":true}}}}`,
	`{"amount": 526.60, "capture": true, "currency": "CAD", "customer": "cus_a1", "card_last4": "9898"}`,
	`"password"`, `1e400`, `[]`, `{}`, `{"":{"password":""}}`,
}

// FuzzMaskScanSameAsTokens holds the one-pass scanner to the token decoder
// it replaced: on any valid JSON, the same output and the same verdict.
func FuzzMaskScanSameAsTokens(f *testing.F) {
	for _, s := range maskScanSeeds {
		f.Add(s)
	}
	m := ForKeys(DefaultKeys)
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			return
		}
		want, wantMasked := m.maskTokens(json.RawMessage(in))
		got, gotMasked := m.maskScan([]byte(in))
		if gotMasked != wantMasked || string(got) != string(want) {
			t.Fatalf("maskScan(%q) = %q, %v; the token decoder gives %q, %v", in, got, gotMasked, want, wantMasked)
		}
	})
}

// FuzzMaskQuickTestSameAsTokens holds Mask (quick test, scanner, decoder)
// to the token decoder alone, on any input, valid JSON or not.
func FuzzMaskQuickTestSameAsTokens(f *testing.F) {
	for _, s := range append(maskScanSeeds, `{"password":`, `[1] x`, `{"a":1}{"b":2}`, "") {
		f.Add(s)
	}
	m := ForKeys(append(DefaultKeys, "é", "k"))
	f.Fuzz(func(t *testing.T, in string) {
		want, wantMasked := json.RawMessage(in), false
		if len(m.patterns) > 0 && len(bytes.TrimSpace([]byte(in))) > 0 {
			want, wantMasked = m.maskTokens(json.RawMessage(in))
		}
		got, gotMasked := m.Mask(json.RawMessage(in))
		if gotMasked != wantMasked || string(got) != string(want) {
			t.Fatalf("Mask(%q) = %q, %v; the token decoder gives %q, %v", in, got, gotMasked, want, wantMasked)
		}
	})
}

// TestMaskScanCheap: masking valid arguments that hold a sensitive key
// copies them in one pass, not one allocation per token.
func TestMaskScanCheap(t *testing.T) {
	m := ForKeys(DefaultKeys)
	raw := json.RawMessage(`{"amount": 526.60, "capture": true, "currency": "CAD", "customer": "cus_a14583af531a7", "card_last4": "9898", "items": [{"sku": "SKU-4471", "quantity": 5}]}`)
	want := `{"amount":526.60,"capture":true,"currency":"CAD","customer":"cus_a14583af531a7","card_last4":"•••","items":[{"sku":"SKU-4471","quantity":5}]}`
	allocs := testing.AllocsPerRun(100, func() {
		if got, masked := m.Mask(raw); !masked || string(got) != want {
			t.Fatalf("Mask = %s, %v", got, masked)
		}
	})
	if allocs > 12 {
		t.Errorf("masking took %.0f allocations, want at most 12", allocs)
	}
}
