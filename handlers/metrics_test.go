package handlers_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"lifeline/handlers"
	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/metrics"
)

const metricsToken = "scrape-token-0123456789"

// TestMetricsEndpoint: /metrics answers 401 without its Bearer token or with a wrong one,
// and the metrics with it; requests are counted by route template, never by raw path (an
// execution's id or an unknown URL is no label value).
func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		m := metrics.New(db, nil)
		a := newApp(t, db, func(d *handlers.Deps, _ string) {
			d.Metrics = &handlers.Metrics{Measure: m.HTTP(), Handler: m.Handler(), Token: metricsToken}
		})
		tn := a.tenant("Biuro Metryk")
		c := a.srv.Client()
		for name, hdr := range map[string]map[string]string{
			"no token":    nil,
			"wrong token": bearer("scrape-token-0123456780"),
			"not bearer":  {"Authorization": "Basic " + metricsToken},
			"empty":       bearer(""),
		} {
			r := do(t, c, http.MethodGet, a.srv.URL+"/metrics", "", hdr)
			if r.status != http.StatusUnauthorized || strings.Contains(r.body, "lifeline_http_requests_total") {
				t.Errorf("%s: %d %q, want 401 without metrics", name, r.status, r.body)
			}
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s: WWW-Authenticate %q", name, r.header.Get("WWW-Authenticate"))
			}
		}
		if r := do(t, c, http.MethodGet, a.srv.URL+"/api/v1/executions/"+tn.execID, "", bearer(tn.token)); r.status != http.StatusOK {
			t.Fatalf("execution: %d %s", r.status, r.body)
		}
		do(t, c, http.MethodGet, a.srv.URL+"/no/such/page-"+tn.execID, "", nil)

		r := do(t, c, http.MethodGet, a.srv.URL+"/metrics", "", bearer(metricsToken))
		if r.status != http.StatusOK {
			t.Fatalf("with the token: %d %s", r.status, r.body)
		}
		if !strings.Contains(r.body, `lifeline_http_requests_total{code="200",host="",method="GET",url="/api/v1/executions/:id"} 1`) {
			t.Errorf("the execution's request is not counted by its route template:\n%s", grep(r.body, "lifeline_http_requests_total"))
		}
		if strings.Contains(r.body, tn.execID) {
			t.Errorf("an execution's id is a label value:\n%s", grep(r.body, tn.execID))
		}
		if strings.Contains(r.body, "/no/such") {
			t.Errorf("an unknown path is a label value:\n%s", grep(r.body, "/no/such"))
		}
	})
}

// TestMetricsOffByDefault: without metrics there is no /metrics on the app (an unknown
// page: the sign-in page for a visitor).
func TestMetricsOffByDefault(t *testing.T) {
	t.Parallel()
	a := newApp(t, modeltest.New(t, models.SQLite))
	r := do(t, a.srv.Client(), http.MethodGet, a.srv.URL+"/metrics", "", bearer(metricsToken))
	if strings.Contains(r.body, "# TYPE") || strings.Contains(r.body, "go_goroutines") || strings.Contains(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics without metrics configured: %d %q", r.status, r.body)
	}
}

// TestMetricsServer: the separate listener's handler serves /metrics without a token when
// none is set, requires it when one is, and serves nothing else.
func TestMetricsServer(t *testing.T) {
	t.Parallel()
	m := metrics.New(modeltest.New(t, models.SQLite), nil)
	open := httptest.NewServer(handlers.MetricsServer(m.Handler(), ""))
	defer open.Close()
	closed := httptest.NewServer(handlers.MetricsServer(m.Handler(), metricsToken))
	defer closed.Close()
	c := http.DefaultClient
	if r := do(t, c, http.MethodGet, open.URL+"/metrics", "", nil); r.status != http.StatusOK || !strings.Contains(r.body, "go_goroutines") {
		t.Errorf("open /metrics: %d", r.status)
	}
	if r := do(t, c, http.MethodGet, open.URL+"/", "", nil); r.status != http.StatusNotFound {
		t.Errorf("open /: %d, want 404", r.status)
	}
	if r := do(t, c, http.MethodGet, closed.URL+"/metrics", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("token-guarded /metrics without it: %d, want 401", r.status)
	}
	if r := do(t, c, http.MethodGet, closed.URL+"/metrics", "", bearer(metricsToken)); r.status != http.StatusOK {
		t.Errorf("token-guarded /metrics with it: %d", r.status)
	}
}

// grep returns the lines of s that contain sub.
func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
