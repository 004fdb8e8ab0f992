package web

import (
	"mime"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
)

// refuseUnstorableInput answers 400 to a request whose query string is
// malformed, or whose path, form fields or Idempotency-Key hold a NUL byte
// or text that is not valid UTF-8. Postgres
// text refuses both, so such input could only fail later, inside a write —
// and a flow of several writes (a sign-in records the attempt, then its
// outcome) would be left half done. JSON bodies are decoded by each handler;
// should a NUL escaped in JSON (\u0000) reach the database, the error
// handler turns its refusal into the same 400 (see classify).
func refuseUnstorableInput() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if !dlq.StorableText(r.URL.Path) {
				return unstorable("The address")
			}
			// echo drops a query string it cannot parse (q=% listed
			// everything unfiltered): refuse it instead. What a query
			// holds is the pages' to check: a filter page refuses a bad
			// value beside its field, with the form still there.
			if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
				return handlers.BadRequest("invalid_query", "The address's query string is malformed (%v); a literal %% is written %%25.", err)
			}
			if !dlq.StorableText(r.Header.Get("Idempotency-Key")) {
				return unstorable("The Idempotency-Key header")
			}
			if r.Method == http.MethodPost && isURLEncodedForm(r) {
				form, err := c.FormParams()
				if err != nil {
					return handlers.BadRequest("invalid_form", "The form could not be read: %v.", err)
				}
				for k, vs := range form {
					if !dlq.StorableText(k) {
						return unstorable("A field name")
					}
					for _, v := range vs {
						if !dlq.StorableText(v) {
							return unstorable("The field " + k)
						}
					}
				}
			}
			return next(c)
		}
	}
}

func unstorable(where string) error {
	return handlers.BadRequest("invalid_text",
		"%s holds a NUL byte or text that is not valid UTF-8, which cannot be stored; nothing was changed.", where)
}

func isURLEncodedForm(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get(echo.HeaderContentType))
	return err == nil && mt == echo.MIMEApplicationForm
}
