// Package handlers holds the console's HTTP handlers: each parses a request
// (query strings are read here and nowhere else, filters.go), calls replay
// or a room of the store, and reads through the masked reads (package
// reads), then renders a templ view or JSON. Handlers hold no SQL and write
// no error pages: they return errors, and the one error handler in package
// web turns them into a page or a JSON body.
//
// Each handler is a maker function that takes exactly the dependencies it
// needs, as a narrow interface, and returns an echo.HandlerFunc.
package handlers
