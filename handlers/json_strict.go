package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

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
// of t only when case is ignored.
func checkStrict(body []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := walkStrict(dec, t, ""); err != nil && !errors.Is(err, errMalformed) {
		return err
	}
	// Malformed JSON is the decoder's to explain, with its position.
	return nil
}

// errMalformed stops the walk at the first token that is not JSON.
var errMalformed = errors.New("malformed JSON")

// walkStrict reads one JSON value from dec; t is the Go type it decodes
// into (nil where it is free-form: arguments, raw JSON, any), path where it
// is, for the error.
func walkStrict(dec *json.Decoder, t reflect.Type, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return errMalformed
	}
	t = elemType(t)
	switch tok {
	case json.Delim('{'):
		return walkStrictObject(dec, t, path)
	case json.Delim('['):
		return walkStrictArray(dec, t, path)
	}
	return nil
}

// walkStrictObject reads an object's members after its { and its closing
// }: each key must be new in this object, and must name one of t's fields
// exactly when it names one at all.
func walkStrictObject(dec *json.Decoder, t reflect.Type, path string) error {
	seen := map[string]bool{}
	fields := fieldsOf(t)
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return errMalformed
		}
		key, _ := kt.(string)
		at := joinPath(path, key)
		if seen[key] {
			return &dlq.ValidationError{Fields: map[string]string{at: "appears twice in one object; send each field once"}}
		}
		seen[key] = true
		next, err := memberType(t, fields, key, at)
		if err != nil {
			return err
		}
		if err := walkStrict(dec, next, at); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return errMalformed
	}
	return nil
}

// memberType returns the type the value of key (at path at) decodes into:
// the field's when t is a struct, the element's when t is a map, nil when
// free-form. A key that matches a field only when case is ignored is
// refused, since encoding/json would accept it and a proxy would not.
func memberType(t reflect.Type, fields map[string]reflect.Type, key, at string) (reflect.Type, error) {
	if fields == nil {
		if t != nil && t.Kind() == reflect.Map {
			return t.Elem(), nil
		}
		return nil, nil
	}
	f, ok := fields[key]
	if !ok {
		if exact := caseMatch(fields, key); exact != "" {
			return nil, &dlq.ValidationError{Fields: map[string]string{at: fmt.Sprintf("field names are case-sensitive: did you mean %q?", exact)}}
		}
	}
	return f, nil
}

// walkStrictArray reads an array's elements after its [ and its closing
// ], each against t's element type when t is a slice or an array.
func walkStrictArray(dec *json.Decoder, t reflect.Type, path string) error {
	var elem reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		elem = t.Elem()
	}
	for i := 0; dec.More(); i++ {
		if err := walkStrict(dec, elem, fmt.Sprintf("%s[%d]", path, i)); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // ']'
		return errMalformed
	}
	return nil
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

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
