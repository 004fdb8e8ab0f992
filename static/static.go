// Package static embeds the console's CSS and JavaScript. Everything the
// pages load comes from here, so the console works offline and under a
// Content-Security-Policy that allows no inline script and no CDN.
//
// js/htmx.min.js is htmx 2.0.11, copied unmodified from the htmx.org npm
// package (see js/htmx.LICENSE).
package static

import "embed"

// FS holds css/, js/ and the favicon.
//
//go:embed css js favicon.svg
var FS embed.FS
