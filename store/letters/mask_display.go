package letters

import (
	"encoding/json"
	"errors"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/mask"
)

// RestoreMasked is mask.RestoreMasked with its refusal as the store's
// invalid input, which the console answers with 422 and the field.
func RestoreMasked(edited, original json.RawMessage, field string) (json.RawMessage, error) {
	b, err := mask.RestoreMasked(edited, original, field)
	if fe, ok := errors.AsType[*mask.FieldError](err); ok {
		return nil, &dlq.ValidationError{Fields: map[string]string{fe.Field: fe.Problem}}
	}
	return b, err
}
