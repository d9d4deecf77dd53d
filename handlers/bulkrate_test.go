package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestBulkRateSetting: the organization's bulk rate is 20 a second by default; admins set it
// through the API and the rules page (1–500); out of range or not a number is 422 with the
// field named and nothing stored; accountants may not; another organization keeps its own.
func TestBulkRateSetting(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Tempa")
		other := a.tenant("Inne Biuro Tempa")
		api := func(method, path, token, body string) resp {
			return do(t, http.DefaultClient, method, a.srv.URL+path, body, bearer(token))
		}
		if r := api("GET", "/api/v1/organization/settings", rs.token, ""); r.status != 200 || r.json(t)["bulkRate"] != 20.0 {
			t.Fatalf("default: %d %s", r.status, r.body)
		}
		for _, body := range []string{`{"bulkRate": 0}`, `{"bulkRate": 501}`, `{"bulkRate": 2.5}`, `{"bulkRate": "200"}`, `{"bulkRate": null}`, `{"bulkRate": 200, "accountantsMayFix": "no"}`} {
			if r := api("PATCH", "/api/v1/organization/settings", rs.token, body); r.status != 422 || fieldsOf(t, r)["bulkRate"] == nil && !strings.Contains(body, `"no"`) {
				t.Errorf("PATCH %s: %d %s", body, r.status, r.body)
			}
		}
		if r := api("GET", "/api/v1/organization/settings", rs.token, ""); r.json(t)["bulkRate"] != 20.0 {
			t.Fatalf("a refused change was stored: %s", r.body)
		}
		if r := api("PATCH", "/api/v1/organization/settings", rs.accountantToken, `{"bulkRate": 200}`); r.status != 403 {
			t.Errorf("accountant sets the rate: %d", r.status)
		}
		if r := api("GET", "/api/v1/organization/settings", rs.accountantToken, ""); r.status != 403 {
			t.Errorf("accountant reads the settings: %d", r.status)
		}
		if r := api("PATCH", "/api/v1/organization/settings", rs.token, `{"bulkRate": 200}`); r.status != 200 || r.json(t)["bulkRate"] != 200.0 || r.json(t)["accountantsMayFix"] != true {
			t.Fatalf("set 200: %d %s", r.status, r.body)
		}
		if rate, err := db.BulkRate(t.Context(), rs.org); err != nil || rate != 200 {
			t.Fatalf("stored rate %d %v", rate, err)
		}
		if r := api("GET", "/api/v1/organization/settings", other.token, ""); r.json(t)["bulkRate"] != 20.0 {
			t.Errorf("another organization's rate changed: %s", r.body)
		}

		// The rules page: the field shows the rate; a bad one is the form again (422) with the
		// field's message, nothing stored; a good one is stored; a form without it keeps it.
		admin, csrf := a.browser(rs.tenant)
		page := do(t, admin, "GET", a.srv.URL+"/settings/rules", "", nil)
		if page.status != 200 || !strings.Contains(page.body, `data-testid="rules-bulkrate"`) || !strings.Contains(page.body, `value="200"`) {
			t.Fatalf("rules page: %d", page.status)
		}
		for _, bad := range []string{"0", "501", "szybko", ""} {
			r := postForm(t, admin, csrf, a.srv.URL+"/settings/rules", url.Values{"accountantsMayFix": {"true"}, "bulkRate": {bad}})
			if r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, `data-testid="field-error"`) || !strings.Contains(r.body, `aria-invalid="true"`) {
				t.Errorf("form bulkRate=%q: %d", bad, r.status)
			}
		}
		if rate, _ := db.BulkRate(t.Context(), rs.org); rate != 200 {
			t.Fatalf("a refused form stored %d", rate)
		}
		if r := postForm(t, admin, csrf, a.srv.URL+"/settings/rules", url.Values{"accountantsMayFix": {"true"}, "bulkRate": {"350"}}); r.status != http.StatusSeeOther {
			t.Fatalf("form 350: %d", r.status)
		}
		if r := postForm(t, admin, csrf, a.srv.URL+"/settings/rules", url.Values{"accountantsMayFix": {"true"}}); r.status != http.StatusSeeOther {
			t.Fatalf("form without the rate: %d", r.status)
		}
		if rate, _ := db.BulkRate(t.Context(), rs.org); rate != 350 {
			t.Fatalf("form stored %d, want 350", rate)
		}
		acc, accCSRF := a.browser(rs.accountant)
		if r := postForm(t, acc, accCSRF, a.srv.URL+"/settings/rules", url.Values{"bulkRate": {"500"}}); r.status != http.StatusForbidden {
			t.Errorf("accountant's form: %d", r.status)
		}
		if rate, _ := db.BulkRate(t.Context(), rs.org); rate != 350 {
			t.Fatalf("the accountant's form stored %d", rate)
		}
	})
}
