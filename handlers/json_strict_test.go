package handlers

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/redrive/redrive/dlq"
)

func TestCheckStrict(t *testing.T) {
	type inner struct {
		Name string `json:"name"`
	}
	type embedded struct {
		Reason string `json:"reason"`
	}
	type body struct {
		embedded
		Task   string           `json:"task"`
		Items  []inner          `json:"items"`
		Filter *inner           `json:"filter"`
		Args   json.RawMessage  `json:"args"`
		Labels map[string]inner `json:"labels"`
		Free   any              `json:"free"`
		Skip   string           `json:"-"`
		Plain  string
		Tags   map[string]string `json:"tags"`
	}
	typ := reflect.TypeFor[*body]()
	for _, tc := range []struct {
		name, json, field, says string
	}{
		{"Exact", `{"task":"a","reason":"r","items":[{"name":"x"}],"filter":{"name":"y"},"args":{"Task":1},"Plain":"p"}`, "", ""},
		{"OtherCaseAtTheTop", `{"task":"a","Task":"b"}`, "Task", `did you mean "task"`},
		{"OtherCaseOfAPromotedField", `{"Reason":"r"}`, "Reason", `did you mean "reason"`},
		{"OtherCaseInAnArray", `{"items":[{"name":"x"},{"NAME":"y"}]}`, "items[1].NAME", `did you mean "name"`},
		{"OtherCaseBehindAPointer", `{"filter":{"Name":"y"}}`, "filter.Name", "case-sensitive"},
		{"OtherCaseInAMapsValue", `{"labels":{"k":{"Name":"y"}}}`, "labels.k.Name", "case-sensitive"},
		{"FreeFormKeysAreTheirOwn", `{"args":{"TASK":1,"task":2},"free":{"Task":1},"tags":{"Task":"x"}}`, "", ""},
		{"DuplicateAtTheTop", `{"task":"a","task":"b"}`, "task", "twice"},
		{"DuplicateInRawArguments", `{"args":[{"a":1,"a":2}]}`, "args[0].a", "twice"},
		{"DuplicateInAnyValue", `{"free":{"k":1,"k":1}}`, "free.k", "twice"},
		{"MalformedIsTheDecodersToSay", `{"task":`, "", ""},
		{"MalformedInAnArrayEnds", `{"items":[{"name":"x"},`, "", ""},
		{"MalformedValueInAnArrayEnds", `{"args":[1, tru]}`, "", ""},
		{"MalformedKeyEnds", `{"task":"a", 5: 1}`, "", ""},
		{"UnclosedObjectInFreeFormEnds", `{"free":{"k":1`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkStrict([]byte(tc.json), typ)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ve *dlq.ValidationError
			if !errors.As(err, &ve) || !strings.Contains(ve.Fields[tc.field], tc.says) {
				t.Fatalf("error %v; want field %q saying %q", err, tc.field, tc.says)
			}
		})
	}
}
