package handlers

import (
	"fmt"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
)

// Render renders component into a buffer first, so a failed render never
// sends half a page, then writes it with status, as c.HTMLBlob would.
func Render(c echo.Context, status int, component templ.Component) error {
	var page pageBuffer
	if err := component.Render(c.Request().Context(), &page); err != nil {
		return fmt.Errorf("render: %w", err)
	}
	r := c.Response()
	if r.Header().Get(echo.HeaderContentType) == "" {
		r.Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	}
	r.WriteHeader(status)
	for _, chunk := range page.chunks {
		if _, err := r.Write(chunk); err != nil {
			return err
		}
	}
	return nil
}

// pageChunk is the size of a pageBuffer's chunks: most pages fit in a
// few.
const pageChunk = 16 << 10

// pageBuffer holds a rendered page in chunks of pageChunk bytes, so that
// it grows a chunk at a time. A bytes.Buffer grows by copying into a slice
// a quarter larger each time: a list page of 68 KB allocated 250 KB that
// way, and what a page allocates is what the garbage collector's work
// follows (a third of the list page's time).
type pageBuffer struct {
	chunks [][]byte
}

// Write appends p to the last chunk and to new ones as they fill.
func (b *pageBuffer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		last := len(b.chunks) - 1
		if last < 0 || len(b.chunks[last]) == cap(b.chunks[last]) {
			b.chunks = append(b.chunks, make([]byte, 0, pageChunk))
			last++
		}
		chunk := b.chunks[last]
		k := copy(chunk[len(chunk):cap(chunk)], p)
		b.chunks[last] = chunk[:len(chunk)+k]
		p = p[k:]
	}
	return n, nil
}

// IsHTMX reports whether the request came from htmx, which wants a fragment
// rather than a whole page.
func IsHTMX(c echo.Context) bool {
	return c.Request().Header.Get("HX-Request") == "true"
}

// BadRequest returns a problem with the request itself (a bad filter, a
// malformed body), shown to the user as it is; the code says which
// ("invalid_filter") and must be one web's status table knows (400).
func BadRequest(code, format string, args ...any) error {
	return &dlq.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// NotFound returns a dlq.Error coded dlq.ENotFound with its own message.
func NotFound(format string, args ...any) error {
	return &dlq.Error{Code: dlq.ENotFound, Message: fmt.Sprintf(format, args...)}
}
