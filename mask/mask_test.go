package mask_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/redrive/redrive/mask"
)

func TestMask(t *testing.T) {
	t.Parallel()
	m := mask.ForKeys(mask.DefaultKeys)
	cases := []struct {
		name, in, want string
		masked         bool
	}{
		{"PositionalArgsUntouched", `[1, "order-7", null, true, 2.50]`, `[1, "order-7", null, true, 2.50]`, false},
		{"TopLevelKey", `{"password":"hunter2","user":"ann"}`, `{"password":"•••","user":"ann"}`, true},
		{"CaseInsensitiveSubstring", `{"Card_Number":"4111","cardCVC":123,"API_TOKEN":"x"}`, `{"Card_Number":"•••","cardCVC":"•••","API_TOKEN":"•••"}`, true},
		{"Nested", `{"payment":{"card":{"number":"4111","exp":"12/30"},"amount":10}}`, `{"payment":{"card":"•••","amount":10}}`, true},
		{"InsideArrays", `[{"ssn":"123-45-6789"},[{"auth":{"Authorization":"Bearer x"}}]]`, `[{"ssn":"•••"},[{"auth":{"Authorization":"•••"}}]]`, true},
		{"KeepsOrderAndNumbers", `{"z":1e400,"secret":[1,2],"a":0.1000}`, `{"z":1e400,"secret":"•••","a":0.1000}`, true},
		{"EmptyContainers", `{"a":{},"b":[]}`, `{"a":{},"b":[]}`, false},
		{"InvalidJSONHiddenWhole", `{"password":`, `"•••"`, true},
		{"Unicode", `{"naïve":"é","secretKey":"ü"}`, `{"naïve":"é","secretKey":"•••"}`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, masked := m.Mask(json.RawMessage(tc.in))
			if masked != tc.masked {
				t.Errorf("masked = %v, want %v", masked, tc.masked)
			}
			if !masked {
				if string(got) != tc.in {
					t.Errorf("unmasked input changed: %s", got)
				}
				return
			}
			if string(got) != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
	t.Run("NoPatternsMasksNothing", func(t *testing.T) {
		got, masked := mask.ForKeys(nil).Mask(json.RawMessage(`{"password":"x"}`))
		if masked || string(got) != `{"password":"x"}` {
			t.Errorf("got %s %v", got, masked)
		}
	})
}

func TestRestoreMasked(t *testing.T) {
	t.Parallel()
	original := json.RawMessage(`{"card":{"number":"4111","exp":"12/30"},"amount":10,"items":[{"token":"t1"},{"token":"t2"}]}`)
	m := mask.ForKeys(mask.DefaultKeys)
	shown, _ := m.Mask(original)

	t.Run("UneditedPlaceholdersGetTheRealValues", func(t *testing.T) {
		got, err := mask.RestoreMasked(shown, original, "kwargs")
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEq(t, got, original) {
			t.Errorf("got %s, want %s", got, original)
		}
	})
	t.Run("EditedFieldKeptPlaceholderRestored", func(t *testing.T) {
		edited := strings.Replace(string(shown), `"amount":10`, `"amount":12`, 1)
		got, err := mask.RestoreMasked(json.RawMessage(edited), original, "kwargs")
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Replace(string(original), `"amount":10`, `"amount":12`, 1)
		if !jsonEq(t, got, json.RawMessage(want)) || strings.Contains(string(got), mask.Placeholder) {
			t.Errorf("got %s, want %s", got, want)
		}
	})
	t.Run("TypedValueWins", func(t *testing.T) {
		edited := `{"card":{"number":"5555","exp":"01/31"},"amount":10,"items":[{"token":"•••"},{"token":"new"}]}`
		got, err := mask.RestoreMasked(json.RawMessage(edited), original, "kwargs")
		if err != nil {
			t.Fatal(err)
		}
		want := `{"card":{"number":"5555","exp":"01/31"},"amount":10,"items":[{"token":"t1"},{"token":"new"}]}`
		if !jsonEq(t, got, json.RawMessage(want)) {
			t.Errorf("got %s, want %s", got, want)
		}
	})
	t.Run("PlaceholderWithNothingBehindItIsRefused", func(t *testing.T) {
		_, err := mask.RestoreMasked(json.RawMessage(`{"password":"•••"}`), original, "kwargs")
		var ferr *mask.FieldError
		if !errors.As(err, &ferr) || ferr.Field != "kwargs" || ferr.Problem == "" {
			t.Fatalf("want a field error on kwargs, got %v", err)
		}
	})
	t.Run("NoPlaceholderUnchanged", func(t *testing.T) {
		in := json.RawMessage(`{"b":1,"a":2}`)
		got, err := mask.RestoreMasked(in, original, "kwargs")
		if err != nil || string(got) != string(in) {
			t.Fatalf("got %s, %v", got, err)
		}
	})
}

func jsonEq(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

func FuzzMask(f *testing.F) {
	for _, s := range []string{`[]`, `{"password":"x"}`, `[{"a":{"token":[1,{"b":2}]}}]`, `{"":null}`, `"str"`, `1`, `{`} {
		f.Add(s)
	}
	m := mask.ForKeys(mask.DefaultKeys)
	f.Fuzz(func(t *testing.T, in string) {
		out, masked := m.Mask(json.RawMessage(in))
		if !json.Valid(out) && masked {
			t.Fatalf("Mask(%q) = %q: not JSON", in, out)
		}
		if !masked && string(out) != in {
			t.Fatalf("Mask(%q) changed unmasked input to %q", in, out)
		}
		if masked && json.Valid([]byte(in)) {
			// Masking again finds nothing new, and restoring gives back
			// JSON equal to the input.
			back, err := mask.RestoreMasked(out, json.RawMessage(in), "args")
			if err != nil {
				t.Fatalf("RestoreMasked(Mask(%q)): %v", in, err)
			}
			if !jsonEq(t, back, json.RawMessage(in)) {
				t.Fatalf("RestoreMasked(Mask(%q)) = %s", in, back)
			}
		}
	})
}
