package mask

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Placeholder replaces a sensitive value wherever arguments are shown.
// It is a string that no real secret is likely to be, so an edit that still
// contains it can be recognised and given the real value back.
const Placeholder = "•••"

// DefaultKeys are the key patterns masked when none are configured.
var DefaultKeys = []string{"password", "secret", "token", "authorization", "card", "ssn"}

// Policy hides the values of sensitive keys in job arguments. A key is
// sensitive when it contains one of the patterns, ignoring case, so
// "card" covers "card_number" and "CardCVC". Keys are matched at any depth,
// inside arrays too; a matching key's whole value is hidden, whatever its
// type, because a nested object under "authorization" is as secret as a
// string.
//
// A Policy from New also hides secrets in error text: see
// MaskText.
type Policy struct {
	patterns []string
	// text are the extra patterns (REDRIVE_MASK_PATTERNS) hidden in error
	// messages and tracebacks.
	text []textPattern
}

// ForKeys returns a Policy of key patterns only (no text patterns, and the
// keys unchecked: New is what configuration goes through); blank patterns are
// ignored, and none at all masks nothing.
func ForKeys(patterns []string) Policy {
	var m Policy
	for _, p := range patterns {
		if p = strings.ToLower(strings.TrimSpace(p)); p != "" {
			m.patterns = append(m.patterns, p)
		}
	}
	return m
}

// ParseKeys reads a comma-separated list of key patterns.
func ParseKeys(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Patterns returns the configured patterns, lower case.
func (m Policy) Patterns() []string { return append([]string(nil), m.patterns...) }

// Sensitive reports whether values under key are masked.
func (m Policy) Sensitive(key string) bool {
	k := strings.ToLower(key)
	for _, p := range m.patterns {
		if strings.Contains(k, p) {
			return true
		}
	}
	return false
}

// Mask returns raw with every sensitive value replaced by Placeholder,
// and whether anything was replaced. Key order, numbers and everything not
// masked are kept as they were. JSON that cannot be read is hidden whole:
// failing closed shows less, never more.
func (m Policy) Mask(raw json.RawMessage) (json.RawMessage, bool) {
	if len(m.patterns) == 0 || len(bytes.TrimSpace(raw)) == 0 || m.plain(raw) {
		return raw, false
	}
	return m.maskSlow(raw)
}

// maskSlow is Mask past the quick test. Valid JSON is copied in one pass
// over its bytes (maskScan); anything else goes through the token decoder,
// which decides what an error hides exactly as it always has.
func (m Policy) maskSlow(raw json.RawMessage) (json.RawMessage, bool) {
	if json.Valid(raw) {
		return m.maskScan(raw)
	}
	return m.maskTokens(raw)
}

// maskTokens masks raw token by token with encoding/json's decoder.
func (m Policy) maskTokens(raw json.RawMessage) (json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out bytes.Buffer
	masked, err := m.copyValue(dec, &out, false)
	if err == nil {
		if _, end := dec.Token(); end != io.EOF {
			err = errors.New("trailing data")
		}
	}
	if err != nil {
		return json.RawMessage(strconv.Quote(Placeholder)), true
	}
	if !masked {
		return raw, false
	}
	return out.Bytes(), true
}

// plain reports, without decoding raw, that it is valid JSON in which no
// key is sensitive, so that masking would leave it as it is and take no
// secret from it: most arguments are like that, and decoding them token by
// token is most of what masking a page costs. A key is sensitive when its
// lower-case form contains a pattern; written without escapes, a key's
// lower-case form is part of raw's, so a raw whose lower-case form holds
// no pattern has no sensitive key. Anything with a backslash (an escape
// can spell a key) or invalid UTF-8 takes the decoding path.
func (m Policy) plain(raw []byte) bool {
	if bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(raw) {
		return false
	}
	lower := bytes.ToLower(raw)
	for _, p := range m.patterns {
		if bytes.Contains(lower, []byte(p)) {
			return false
		}
	}
	return json.Valid(raw)
}

// copyValue copies one JSON value from dec to out, replacing it with the
// placeholder when hide is set and masking sensitive keys inside it.
func (m Policy) copyValue(dec *json.Decoder, out *bytes.Buffer, hide bool) (bool, error) {
	tok, err := dec.Token()
	if err != nil {
		return false, err
	}
	if hide {
		if d, ok := tok.(json.Delim); ok {
			if err := skipContainer(dec, d); err != nil {
				return false, err
			}
		}
		out.WriteString(strconv.Quote(Placeholder))
		return true, nil
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return false, writeScalar(out, tok)
	}
	var masked bool
	switch d {
	case '{':
		masked, err = m.copyObject(dec, out)
	case '[':
		masked, err = m.copyArray(dec, out)
	default:
		return false, fmt.Errorf("unexpected %v", d)
	}
	if err != nil {
		return false, err
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return false, err
	}
	return masked, nil
}

// copyObject copies an object's members after its { up to (not including)
// the closing token, hiding the value of each sensitive key, and reports
// whether anything inside was masked.
func (m Policy) copyObject(dec *json.Decoder, out *bytes.Buffer) (bool, error) {
	masked := false
	out.WriteByte('{')
	for i := 0; dec.More(); i++ {
		keyTok, err := dec.Token()
		if err != nil {
			return false, err
		}
		key, _ := keyTok.(string)
		if i > 0 {
			out.WriteByte(',')
		}
		kb, _ := json.Marshal(key)
		out.Write(kb)
		out.WriteByte(':')
		mv, err := m.copyValue(dec, out, m.Sensitive(key))
		if err != nil {
			return false, err
		}
		masked = masked || mv
	}
	out.WriteByte('}')
	return masked, nil
}

// copyArray copies an array's elements after its [ up to (not including)
// the closing token; an element has no key of its own, so only the
// objects inside it can hide anything. It reports whether anything was
// masked.
func (m Policy) copyArray(dec *json.Decoder, out *bytes.Buffer) (bool, error) {
	masked := false
	out.WriteByte('[')
	for i := 0; dec.More(); i++ {
		if i > 0 {
			out.WriteByte(',')
		}
		mv, err := m.copyValue(dec, out, false)
		if err != nil {
			return false, err
		}
		masked = masked || mv
	}
	out.WriteByte(']')
	return masked, nil
}

func skipContainer(dec *json.Decoder, open json.Delim) error {
	depth := 1
	for depth > 0 {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return nil
}

func writeScalar(out *bytes.Buffer, tok json.Token) error {
	switch v := tok.(type) {
	case nil:
		out.WriteString("null")
	case bool:
		out.WriteString(strconv.FormatBool(v))
	case json.Number:
		out.WriteString(v.String())
	case string:
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		out.Write(b)
	default:
		return fmt.Errorf("unexpected token %v", tok)
	}
	return nil
}

// RestoreMasked gives an edited argument value its real values back where
// it still holds Placeholder: someone who edits one field of a masked
// payload and sends the rest back as shown must not replay "•••" in place
// of a card number. A placeholder is replaced by the original's value at
// the same path (same keys, same array positions); one with no value there
// is an error, since the real value cannot be known. field names the
// argument ("args" or "kwargs") in that error, a *FieldError.
func RestoreMasked(edited, original json.RawMessage, field string) (json.RawMessage, error) {
	if !bytes.Contains(edited, []byte(Placeholder)) {
		return edited, nil
	}
	var e, o any
	if err := decodeNumbers(edited, &e); err != nil {
		return nil, &FieldError{Field: field, Problem: "invalid JSON: " + err.Error()}
	}
	if err := decodeNumbers(original, &o); err != nil {
		o = nil
	}
	restored, err := restore(e, o, true, field)
	if err != nil {
		return nil, &FieldError{Field: field, Problem: err.Error()}
	}
	b, err := json.Marshal(restored)
	if err != nil {
		return nil, fmt.Errorf("restore masked %s: %w", field, err)
	}
	return b, nil
}

// FieldError is an edited argument RestoreMasked refuses: the edit is
// wrong, not the server, so callers report it as invalid input on Field.
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

func decodeNumbers(raw json.RawMessage, into *any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(into)
}

// restore walks edited and original together; have says whether original
// exists at this path.
func restore(edited, original any, have bool, path string) (any, error) {
	switch e := edited.(type) {
	case string:
		if e != Placeholder {
			return e, nil
		}
		if !have {
			return nil, fmt.Errorf("%s holds the hidden value %s where the dead letter has no value to put back: "+
				"type the value, or reveal the letter's values first", path, Placeholder)
		}
		return original, nil
	case map[string]any:
		o, _ := original.(map[string]any)
		for k, v := range e {
			ov, ok := o[k]
			r, err := restore(v, ov, ok, path+"."+k)
			if err != nil {
				return nil, err
			}
			e[k] = r
		}
		return e, nil
	case []any:
		o, _ := original.([]any)
		for i, v := range e {
			var ov any
			ok := i < len(o)
			if ok {
				ov = o[i]
			}
			r, err := restore(v, ov, ok, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			e[i] = r
		}
		return e, nil
	default:
		return e, nil
	}
}
