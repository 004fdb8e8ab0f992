package handlers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/redrive/redrive/dlq"
)

// encoding/json matches an object's keys to fields without regard to case
// and keeps the last of two equal keys, so {"task": "a", "Task": "b"} is
// read as task "b". A proxy or a validator in front of Redrive that reads
// the body by the letter would see task "a": the same bytes, two requests.
// checkStrict refuses both readings before decoding: every key of every
// object must be unique, and a key that names a field must name it
// exactly.

// checkStrict checks body, a JSON value about to be decoded into a value
// of type t, for duplicate keys anywhere and for keys that match a field
// of t only when case is ignored. Malformed JSON is the decoder's to
// explain, with its position: it passes here.
//
// It reads the bytes itself rather than through encoding/json's Decoder:
// Token allocates for every token, and on a batch of 1,000 letters
// (POST /api/v1/letters) the walk through Token was two thirds of the
// body's decoding. json.Valid first, so that the scan may take the JSON
// as well formed.
func checkStrict(body []byte, t reflect.Type) error {
	if !json.Valid(body) {
		return nil
	}
	s := strictScan{b: body, fields: map[reflect.Type]map[string]reflect.Type{}}
	return s.value(t)
}

// strictScan reads a well-formed JSON value, checking each object's keys;
// path holds the keys and indexes that lead to where it is, for the
// error, and fields the struct fields of each type it has met.
type strictScan struct {
	b      []byte
	i      int
	path   []pathStep
	fields map[reflect.Type]map[string]reflect.Type
}

// pathStep is a key of an object, or the index of an array's element.
type pathStep struct {
	key   string
	index int // -1 for a key
}

// value reads one value, which decodes into t (nil where it is free-form:
// arguments, raw JSON, any).
func (s *strictScan) value(t reflect.Type) error {
	s.space()
	t = elemType(t)
	switch s.b[s.i] {
	case '{':
		return s.object(t)
	case '[':
		return s.array(t)
	case '"':
		s.str()
	default: // a number, true, false or null
		for s.i < len(s.b) && !strings.ContainsRune(",]} \t\r\n", rune(s.b[s.i])) {
			s.i++
		}
	}
	return nil
}

// object reads an object from its {: each key must be new in it, and must
// name one of t's fields exactly when it names one at all.
func (s *strictScan) object(t reflect.Type) error {
	s.i++ // {
	fields := s.fieldsOf(t)
	var seen []string
	var seenSet map[string]bool
	for {
		s.space()
		if s.b[s.i] == '}' {
			s.i++
			return nil
		}
		if s.b[s.i] == ',' {
			s.i++
			s.space()
		}
		key := s.key()
		s.path = append(s.path, pathStep{key: key, index: -1})
		if slices.Contains(seen, key) || seenSet[key] {
			return &dlq.ValidationError{Fields: map[string]string{s.at(): "appears twice in one object; send each field once"}}
		}
		if len(seen) < 32 {
			seen = append(seen, key)
		} else {
			if seenSet == nil {
				seenSet = map[string]bool{}
			}
			seenSet[key] = true
		}
		next, err := memberType(t, fields, key, s.at)
		if err != nil {
			return err
		}
		s.space()
		s.i++ // :
		if err := s.value(next); err != nil {
			return err
		}
		s.path = s.path[:len(s.path)-1]
	}
}

// array reads an array from its [, each element against t's element type
// when t is a slice or an array.
func (s *strictScan) array(t reflect.Type) error {
	s.i++ // [
	var elem reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		elem = t.Elem()
	}
	for n := 0; ; n++ {
		s.space()
		if s.b[s.i] == ']' {
			s.i++
			return nil
		}
		if s.b[s.i] == ',' {
			s.i++
		}
		s.path = append(s.path, pathStep{index: n})
		if err := s.value(elem); err != nil {
			return err
		}
		s.path = s.path[:len(s.path)-1]
	}
}

// key reads an object's key, a string, unescaped.
func (s *strictScan) key() string {
	start := s.i
	raw := s.str()
	if !bytes.ContainsRune(raw, '\\') && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1])
	}
	// An escape, or bytes that are not UTF-8, which encoding/json reads as
	// U+FFFD: the key as the decoder will see it.
	var key string
	if err := json.Unmarshal(s.b[start:s.i], &key); err != nil {
		return string(raw) // cannot happen: the body is valid JSON
	}
	return key
}

// str reads a string from its opening quote and returns it, quotes
// included.
func (s *strictScan) str() []byte {
	start := s.i
	for s.i++; s.b[s.i] != '"'; s.i++ {
		if s.b[s.i] == '\\' {
			s.i++
		}
	}
	s.i++
	return s.b[start:s.i]
}

// space skips white space.
func (s *strictScan) space() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// at is where the scan is, as the error names it: keys joined by dots,
// indexes in brackets.
func (s *strictScan) at() string {
	var b strings.Builder
	for i, p := range s.path {
		switch {
		case p.index >= 0:
			b.WriteString("[" + strconv.Itoa(p.index) + "]")
		case i > 0:
			b.WriteString("." + p.key)
		default:
			b.WriteString(p.key)
		}
	}
	return b.String()
}

// fieldsOf is the package's fieldsOf, once per type per scan.
func (s *strictScan) fieldsOf(t reflect.Type) map[string]reflect.Type {
	f, ok := s.fields[t]
	if !ok {
		f = fieldsOf(t)
		s.fields[t] = f
	}
	return f
}

// memberType returns the type the value of key (at path at) decodes into:
// the field's when t is a struct, the element's when t is a map, nil when
// free-form. A key that matches a field only when case is ignored is
// refused, since encoding/json would accept it and a proxy would not.
func memberType(t reflect.Type, fields map[string]reflect.Type, key string, at func() string) (reflect.Type, error) {
	if fields == nil {
		if t != nil && t.Kind() == reflect.Map {
			return t.Elem(), nil
		}
		return nil, nil
	}
	f, ok := fields[key]
	if !ok {
		if exact := caseMatch(fields, key); exact != "" {
			return nil, &dlq.ValidationError{Fields: map[string]string{at(): fmt.Sprintf("field names are case-sensitive: did you mean %q?", exact)}}
		}
	}
	return f, nil
}

var rawMessage = reflect.TypeFor[json.RawMessage]()

func elemType(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// fieldsOf maps the JSON names of struct type t's fields (promoted ones
// of embedded structs included) to their types, or returns nil when t is
// not a struct whose keys are names (raw JSON, a map, any).
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	if t == nil || t == rawMessage || t.Kind() != reflect.Struct {
		return nil
	}
	if t.Implements(reflect.TypeFor[json.Unmarshaler]()) || reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return nil // it reads its own JSON, by its own rules
	}
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			for k, v := range fieldsOf(elemType(f.Type)) {
				if _, ok := out[k]; !ok {
					out[k] = v
				}
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// caseMatch returns the field name that key matches when case is ignored,
// or "".
func caseMatch(fields map[string]reflect.Type, key string) string {
	for name := range fields {
		if strings.EqualFold(name, key) {
			return name
		}
	}
	return ""
}
