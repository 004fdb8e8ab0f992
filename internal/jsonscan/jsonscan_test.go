package jsonscan

import (
	"encoding/json"
	"testing"
)

// TestSkipValueLandsAfterEachValue: from the start of each element of an
// array, SkipValue stops on the comma or bracket after it, whatever the
// element holds (strings with escaped quotes and brackets, nesting,
// scalars, white space).
func TestSkipValueLandsAfterEachValue(t *testing.T) {
	raw := []byte(` [ "a\"]b" , {"k": [1, {"x": "}"}], "n": null} ,-1.5e3, true,[ ] ] `)
	var want []json.RawMessage
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	c := Cursor{Raw: raw}
	c.SkipSpace()
	c.I++ // [
	for i, w := range want {
		c.SkipSpace()
		start := c.I
		c.SkipValue()
		if got := string(raw[start:c.I]); got != string(w) {
			t.Errorf("value %d: %q, want %q", i, got, w)
		}
		c.SkipSpace()
		c.I++ // , or ]
	}
}

// TestDecodeStringAsEncodingJSON: escapes, surrogate pairs and invalid
// UTF-8 decode as encoding/json decodes them.
func TestDecodeStringAsEncodingJSON(t *testing.T) {
	for _, tok := range []string{`""`, `"plain"`, `"tab\tquote\"slash\\"`, `"\u00e9\ud83d\ude00"`, "\"bad \xff byte\"", `"\ud800 lone"`} {
		var want string
		if err := json.Unmarshal([]byte(tok), &want); err != nil {
			t.Fatal(err)
		}
		if got := DecodeString([]byte(tok)); got != want {
			t.Errorf("DecodeString(%q) = %q, want %q", tok, got, want)
		}
	}
}
