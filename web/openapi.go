package web

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

// openAPIDocument is the OpenAPI 3.1 description of /api/v1, kept by hand
// beside the routes. openapi_test.go keeps it honest: every API route in
// routes.go is in it and every path in it is a route, and real answers of
// a real server validate against it.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPIPath is where the console serves openapi.json.
const OpenAPIPath = "/api/v1/openapi.json"

// openAPI answers GET /api/v1/openapi.json. It is public: the document
// describes the API's shape, which is in the source anyway, and holds no
// data; tools (code generators, contract checks, a client deciding whether
// it speaks this console's version) can read it before anyone has a token.
func openAPI() echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set("Cache-Control", "public, max-age=300")
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openAPIDocument)
	}
}
