package handlers

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// Metrics is what the app measures and serves for Prometheus (services/metrics).
type Metrics struct {
	// Measure is the middleware that measures every request (by route template).
	Measure echo.MiddlewareFunc
	// Handler serves the metrics in Prometheus's format.
	Handler http.Handler
	// Token, when set, serves Handler at /metrics on the app's own address to requests with
	// "Authorization: Bearer <Token>" (401 otherwise). Empty: no /metrics here (it is off,
	// or served on a separate address, LIFELINE_METRICS_ADDR).
	Token string
}

// metricsHandler serves /metrics to holders of the token.
type metricsHandler struct {
	token   []byte
	handler http.Handler
}

// Serve answers 401 unless the request carries the token as a Bearer credential (compared
// in constant time), and the metrics otherwise.
func (h *metricsHandler) Serve(c echo.Context) error {
	if !h.authorized(c.Request()) {
		unauthorized(c.Response())
		return nil
	}
	h.handler.ServeHTTP(c.Response(), c.Request())
	return nil
}

// MetricsServer is the handler of the separate metrics listener (LIFELINE_METRICS_ADDR): it
// serves h at GET /metrics, to every request when token is empty and to holders of the
// token otherwise, and 404 elsewhere. It shares nothing with the app (no sessions, no pages).
func MetricsServer(h http.Handler, token string) http.Handler {
	mux := http.NewServeMux()
	check := &metricsHandler{token: []byte(token), handler: h}
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		if token != "" && !check.authorized(r) {
			unauthorized(w)
			return
		}
		h.ServeHTTP(w, r)
	})
	return mux
}

// authorized reports whether r carries the token as a Bearer credential (compared in
// constant time).
func (h *metricsHandler) authorized(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), h.token) == 1
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte("a Bearer token is required (LIFELINE_METRICS_TOKEN)\n"))
}
