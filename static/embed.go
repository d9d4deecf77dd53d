// Package static holds the browser assets served under /static/: the app's
// own CSS and JavaScript and a vendored, pinned htmx 2.0.11 (never a CDN).
package static

import "embed"

// FS contains css/ and js/; serve it under /static/ so that
// /static/css/app.css maps to css/app.css.
//
//go:embed css js
var FS embed.FS
