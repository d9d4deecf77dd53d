package handlers_test

import (
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// resolvedLoopback matches what "localhost" resolves to.
var resolvedLoopback = regexp.MustCompile(`127\.\d+\.\d+\.\d+|::1|\[::`)

// freePort is a loopback port nothing listens on.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// Issue 19: no error a tenant can read names a resolved address. The notification test's
// error, the delivery log's last error and an HTTP step's stored error name the host as
// configured ("localhost:port") with the failure's class, never 127.0.0.1 or ::1.
func TestErrorsNameNoResolvedAddress(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newFullApp(t, db)
		tn := a.tenant("Biuro Adresy")
		host := "localhost:" + freePort(t)
		api := func(method, path, body string) resp {
			return do(t, http.DefaultClient, method, a.srv.URL+path, body, bearer(tn.token))
		}
		clean := func(what, text string) {
			t.Helper()
			if resolvedLoopback.MatchString(text) || !strings.Contains(text, host) ||
				!strings.Contains(text, "connection refused") && !strings.Contains(text, "not allowed") {
				t.Errorf("%s: %s, want %s with the failure's class and no resolved address", what, text, host)
			}
		}
		if r := api("PUT", "/api/v1/notifications/settings", `{"channels": ["slack"], "slackWebhookUrl": "http://`+host+`/services/T1/B1/x"}`); r.status != http.StatusOK {
			t.Fatalf("settings: %d %s", r.status, r.body)
		}
		r := api("POST", "/api/v1/notifications/test", `{"channel": "slack"}`)
		msg, _ := r.json(t)["error"].(string)
		clean("the API's test", msg)
		r = api("GET", "/api/v1/notifications/deliveries", "")
		items, _ := r.json(t)["items"].([]any)
		if len(items) == 0 {
			t.Fatalf("no delivery: %s", r.body)
		}
		last, _ := items[0].(map[string]any)["lastError"].(string)
		clean("the delivery log's last error", last)
		b, csrf := a.browser(tn)
		r = do(t, b, "POST", a.srv.URL+"/settings/notifications/test", "channel=slack",
			map[string]string{"Content-Type": "application/x-www-form-urlencoded", "X-CSRF-Token": csrf, "HX-Request": "true"})
		clean("the page's test", parseListDoc(t, r.body).text())

		// An HTTP step's error, stored on its attempt and shown by the API.
		r = api("POST", "/api/v1/workflows", `{"name": "Bramka", "settings": {"retryPolicy": {"maxRetries": 0}},
			"steps": [{"id": "send", "type": "http", "config": {"method": "POST", "url": "http://`+host+`/vat", "body": {"a": 1}}}]}`)
		if r.status != http.StatusCreated {
			t.Fatalf("workflow: %d %s", r.status, r.body)
		}
		r = api("POST", "/api/v1/workflows/"+r.json(t)["id"].(string)+"/executions", `{"input": {}}`)
		exec, _ := r.json(t)["id"].(string)
		deadline := time.Now().Add(15 * time.Second)
		for {
			r = api("GET", "/api/v1/executions/"+exec, "")
			if st := r.json(t)["status"]; st == models.ExecDLQPending || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		att := r.json(t)["steps"].([]any)[0].(map[string]any)["attempts"].([]any)[0].(map[string]any)
		e, _ := att["error"].(map[string]any)
		m, _ := e["message"].(string)
		clean("the step's stored error", m)
		if resolvedLoopback.MatchString(r.body) {
			t.Errorf("the execution names a resolved address: %s", r.body)
		}
	})
}
