package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// listFilters are the list routes and the filter keys each reads, pages and API. The
// route table of TestHostileInputEveryRoute names the same keys.
var listFilters = []struct {
	path string
	keys []string
}{
	{"/executions", []string{"status", "workflowId", "q", "limit", "cursor"}},
	{"/dlq/items", []string{"workflowId", "status", "errorType", "stepId", "from", "to", "q", "limit", "cursor"}},
	{"/breakers", []string{"state", "workflowId"}},
	{"/audit", []string{"event", "actor", "entityType", "entityId", "from", "to", "cursor"}},
	{"/audit/export.csv", []string{"event", "actor", "entityType", "entityId", "from", "to"}}, // every page: no cursor
	{"/notifications/deliveries", []string{"executionId", "channel", "status", "after"}},
	{"/api/v1/executions", []string{"status", "workflowId", "q", "limit", "cursor"}},
	{"/api/v1/dlq", []string{"workflowId", "status", "errorType", "stepId", "from", "to", "q", "limit", "cursor"}},
	{"/api/v1/breakers", []string{"state", "workflowId"}},
	{"/api/v1/notifications/deliveries", []string{"executionId", "limit"}},
	{"/api/v1/notifications", []string{"limit"}},
}

// freeText are the keys whose well-formed values are any short text.
var freeText = map[string]bool{"q": true, "entityId": true, "stepId": true}

// Issue 19: every list filter is checked before its query. NUL bytes, invalid UTF-8,
// control characters, over-long values, two different values, ids that are not UUIDs,
// values outside their set and dates that do not parse are a 422 naming the key, the same
// on SQLite and PostgreSQL, on the pages (the page with its form and a message per key) and
// in the API (JSON with fields). `GET /audit?actor=%00` used to answer 500 on PostgreSQL.
func TestListFiltersRefuseBadValues(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newFullApp(t, db)
		tn := a.tenant("Biuro Filtry")
		browser, _ := a.browser(tn)
		bad := []string{"%00", "%ff", "a%00b", "%1b%5B31m", "%E2%80", strings.Repeat("x", 1000), strings.Repeat("ł", 201)}
		for _, l := range listFilters {
			api := strings.HasPrefix(l.path, "/api/")
			for _, key := range l.keys {
				values := append([]string(nil), bad...)
				if !freeText[key] {
					values = append(values, "not-valid", "2026-13-45", "00000000-0000-0000-0000-00000000000G")
				}
				values = append(values, "ok&"+key+"=other") // two different values
				for _, v := range values {
					u := a.srv.URL + l.path + "?" + key + "=" + v
					what := fmt.Sprintf("GET %s?%s=%.40s", l.path, key, v)
					if api {
						r := do(t, http.DefaultClient, "GET", u, "", bearer(tn.token))
						if f := fieldsOf(t, r); r.status != http.StatusUnprocessableEntity || f[key] == nil {
							t.Errorf("%s: %d %.300s, want 422 naming %s", what, r.status, r.body, key)
						}
						continue
					}
					r := do(t, browser, "GET", u, "", nil)
					doc := parseListDoc(t, r.body)
					named := false
					for _, fe := range doc.testID("field-error") {
						named = named || fe.attr("data-field") == key
					}
					if r.status != http.StatusUnprocessableEntity || !named || len(doc.testID("filter-refused")) != 1 || !strings.Contains(r.body, `role="search"`) {
						t.Errorf("%s: %d, want 422 with the filter form and a message for %s: %.500s", what, r.status, key, doc.text())
					}
				}
			}
		}
		// For htmx, the list's table alone, with the messages (422 responses are swapped).
		r := do(t, browser, "GET", a.srv.URL+"/dlq/items?workflowId=%00", "", map[string]string{"HX-Request": "true"})
		if r.status != http.StatusUnprocessableEntity || strings.Contains(r.body, "<html") || !strings.Contains(r.body, `data-field="workflowId"`) {
			t.Errorf("htmx: %d %.300s", r.status, r.body)
		}
		// Valid values still list: an actor's id, "system", an entity type and id, dates.
		for _, q := range []string{"actor=system", "actor=" + models.NewID(), "entityType=workflow_execution&entityId=" + tn.execID,
			"event=execution.started&from=2026-01-01&to=2099-12-31", "entityId=" + url.QueryEscape("ąę 'x' OR 1=1 --")} {
			if r := do(t, browser, "GET", a.srv.URL+"/audit?"+q, "", nil); r.status != http.StatusOK {
				t.Errorf("GET /audit?%s: %d", q, r.status)
			}
		}
		if r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq?q="+url.QueryEscape("50% ' \" \\ _ ; --")+"&workflowId="+tn.wfID, "", bearer(tn.token)); r.status != http.StatusOK {
			t.Errorf("SQL metacharacters in q: %d %s", r.status, r.body)
		}
	})
}

// jsonRoutes are the API routes that take a JSON object, with a path of the tenant's.
func jsonRoutes(tn *tenant) []struct{ method, path string } {
	return []struct{ method, path string }{
		{"POST", "/api/v1/workflows"}, {"PUT", "/api/v1/workflows/" + tn.wfID}, {"POST", "/api/v1/workflows/" + tn.wfID + "/executions"},
		{"POST", "/api/v1/dlq/" + tn.dlqID + "/actions"}, {"POST", "/api/v1/executions/" + tn.execID + "/retry"},
		{"POST", "/api/v1/compensations/" + models.NewID() + "/actions"}, {"POST", "/api/v1/breakers/" + models.NewID() + "/reset"},
		{"POST", "/api/v1/breakers/" + models.NewID() + "/open"}, {"POST", "/api/v1/connections"}, {"PUT", "/api/v1/connections/" + models.NewID()},
		{"PUT", "/api/v1/notifications/settings"}, {"POST", "/api/v1/notifications/test"}, {"POST", "/api/v1/dlq/bulk"},
	}
}

// Issue 19: a JSON body must be exactly one JSON object. An empty body, null, an array, a
// string, a number, malformed JSON or data after the object is a 422 on "body" (a
// definition's own check names "definition") and changes nothing. `PUT
// /api/v1/notifications/settings` with an empty or null body used to answer 200 and reset
// every setting, dropping the webhook URLs and the recipients.
func TestJSONBodiesMustBeOneObject(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newFullApp(t, db)
		tn := a.tenant("Biuro Treść")
		api := func(method, path, body string) resp {
			return do(t, http.DefaultClient, method, a.srv.URL+path, body, bearer(tn.token))
		}
		settings := `{"enabled": true, "channels": ["email", "slack"], "recipients": ["role:admin", "biuro@example.pl"], "slackWebhookUrl": "` +
			a.ext.URL + `/services/T1/B1/x", "notifyOnBreakerOpen": true, "digestThresholdPerMinute": 3}`
		if r := api("PUT", "/api/v1/notifications/settings", settings); r.status != http.StatusOK {
			t.Fatalf("save settings: %d %s", r.status, r.body)
		}
		saved := api("GET", "/api/v1/notifications/settings", "").body
		audits, execs := count(t, db, "audit_log"), count(t, db, "workflow_executions")
		for _, rt := range jsonRoutes(tn) {
			for _, body := range []string{"", "  \n", "null", "[]", `[{"action": "retry"}]`, `"text"`, "1", "true", "{", `{} {}`, `{}x`, `{}]`} {
				r := api(rt.method, rt.path, body)
				f := fieldsOf(t, r)
				if r.status != http.StatusUnprocessableEntity || (f["body"] == nil && (f["definition"] == nil || !strings.HasSuffix(rt.path, "/workflows") && !strings.Contains(rt.path, "/workflows/"))) {
					t.Errorf("%s %s with %q: %d %s, want 422 on body", rt.method, rt.path, body, r.status, r.body)
				}
			}
		}
		if got := api("GET", "/api/v1/notifications/settings", "").body; got != saved {
			t.Errorf("refused bodies changed the settings:\n%s\n%s", saved, got)
		}
		if n, m := count(t, db, "audit_log"), count(t, db, "workflow_executions"); n != audits || m != execs {
			t.Errorf("refused bodies wrote %d audit entries and %d executions", n-audits, m-execs)
		}
		// PUT replaces: a key left out takes its default ({} is a deliberate reset). No
		// recipients read as an empty list, not null.
		r := api("PUT", "/api/v1/notifications/settings", `{"enabled": true, "channels": ["email"]}`)
		st := r.json(t)
		if r.status != http.StatusOK || st["slackWebhookUrl"] != nil || st["notifyOnBreakerOpen"] != false || fmt.Sprint(st["recipients"]) != "[]" ||
			st["digestThresholdPerMinute"] != float64(10) {
			t.Errorf("a partial PUT: %d %s, want the left-out keys at their defaults", r.status, r.body)
		}
	})
}

// Issue 19: text PostgreSQL cannot store (a NUL character; in a form, bytes that are not
// UTF-8) is refused before anything runs, naming the field, on both databases: a dead
// letter resolved with such notes used to answer 500 on PostgreSQL.
func TestNULIsRefusedBeforeAnythingRuns(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newFullApp(t, db)
		tn := a.tenant("Biuro NUL")
		b, csrf := a.browser(tn)
		for _, notes := range []string{"a\x00b", "a\xffb"} {
			form := url.Values{"action": {"resolve"}, "notes": {notes}, "_csrf": {csrf}}
			r := do(t, b, "POST", a.srv.URL+"/dlq/"+tn.dlqID+"/actions", form.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
			if r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, `data-field="notes"`) {
				t.Errorf("form notes %q: %d %.300s", notes, r.status, r.body)
			}
		}
		r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/dlq/"+tn.dlqID+"/actions", `{"action": "resolve", "resolutionNotes": "a\u0000b"}`, bearer(tn.token))
		if f := fieldsOf(t, r); r.status != http.StatusUnprocessableEntity || f["resolutionNotes"] == nil {
			t.Errorf("API notes with NUL: %d %s", r.status, r.body)
		}
		r = do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/dlq/bulk", `{"action": "resolve", "ids": ["`+tn.dlqID+`"], "resolutionNotes": "ok", "filter": {"q\u0000": "x"}}`, bearer(tn.token))
		if f := fieldsOf(t, r); r.status != http.StatusUnprocessableEntity || f["filter"] == nil {
			t.Errorf("a NUL in a key: %d %s", r.status, r.body)
		}
		if r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq/"+tn.dlqID, "", bearer(tn.token)); r.json(t)["status"] != models.DLQPending {
			t.Errorf("a refused request changed the dead letter: %s", r.body)
		}
	})
}
