package handlers

// The reference for checkStrict: the walk through encoding/json's Decoder
// it replaced (slower, the same rules), which FuzzCheckStrictAsTheWalk
// holds it to on every well-formed body.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/redrive/redrive/dlq"
)

// refCheckStrict checks body, a JSON value about to be decoded into a value
// of type t, for duplicate keys anywhere and for keys that match a field
// of t only when case is ignored.
func refCheckStrict(body []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := refWalk(dec, t, ""); err != nil && !errors.Is(err, errRefMalformed) {
		return err
	}
	// Malformed JSON is the decoder's to explain, with its position.
	return nil
}

// errRefMalformed stops the walk at the first token that is not JSON.
var errRefMalformed = errors.New("malformed JSON")

// walkStrict reads one JSON value from dec; t is the Go type it decodes
// into (nil where it is free-form: arguments, raw JSON, any), path where it
// is, for the error.
func refWalk(dec *json.Decoder, t reflect.Type, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return errRefMalformed
	}
	t = elemType(t)
	switch tok {
	case json.Delim('{'):
		return refWalkObject(dec, t, path)
	case json.Delim('['):
		return refWalkArray(dec, t, path)
	}
	return nil
}

// refWalkObject reads an object's members after its { and its closing
// }: each key must be new in this object, and must name one of t's fields
// exactly when it names one at all.
func refWalkObject(dec *json.Decoder, t reflect.Type, path string) error {
	seen := map[string]bool{}
	fields := fieldsOf(t)
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return errRefMalformed
		}
		key, _ := kt.(string)
		at := refJoinPath(path, key)
		if seen[key] {
			return &dlq.ValidationError{Fields: map[string]string{at: "appears twice in one object; send each field once"}}
		}
		seen[key] = true
		next, err := memberType(t, fields, key, func() string { return at })
		if err != nil {
			return err
		}
		if err := refWalk(dec, next, at); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return errRefMalformed
	}
	return nil
}

// refWalkArray reads an array's elements after its [ and its closing
// ], each against t's element type when t is a slice or an array.
func refWalkArray(dec *json.Decoder, t reflect.Type, path string) error {
	var elem reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		elem = t.Elem()
	}
	for i := 0; dec.More(); i++ {
		if err := refWalk(dec, elem, fmt.Sprintf("%s[%d]", path, i)); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // ']'
		return errRefMalformed
	}
	return nil
}

func refJoinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// On well-formed JSON, checkStrict refuses what the walk through the
// Decoder refused, saying the same thing at the same place, and passes
// what it passed.
func FuzzCheckStrictAsTheWalk(f *testing.F) {
	for _, seed := range []string{
		`{"source":"legacy","letters":[{"external_id":"a","task":"t","history":[{"attempt":1,"class":"E"}]}]}`,
		`{"letters":[{"Task":"t"}]}`, `{"letters":[{"task":"a","task":"b"}]}`, `{"source":"a","source":"b"}`,
		`{"letters":[{"args":[{"a":1,"a":2}],"kwargs":{"k\u0041":1,"kA":2}}]}`, `{"letters":[{"history":[{},{"Attempt":2}]}]}`,
		`{"a\"b":1,"letters":[ {"kwargs": { "x" : [1, 2.5e3, true, null, "s\\"] } } ] }`,
	} {
		f.Add(seed)
	}
	typ := reflect.TypeFor[*ingestRequest]()
	f.Fuzz(func(t *testing.T, body string) {
		if !json.Valid([]byte(body)) {
			return
		}
		got, want := checkStrict([]byte(body), typ), refCheckStrict([]byte(body), typ)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("checkStrict(%q) = %v, the walk said %v", body, got, want)
		}
	})
}
