package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestDeadlineSettings: the ZUS day (15 or 20, default 20) and the at-risk working days
// (0–30, default 3) are the admins': through the API and the rules page; anything else is
// 422 with the field named and nothing stored; a change is audited; accountants may not;
// another organization keeps its own.
func TestDeadlineSettings(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Terminów")
		other := a.tenant("Inne Biuro Terminów")
		api := func(method, path, token, body string) resp {
			return do(t, http.DefaultClient, method, a.srv.URL+path, body, bearer(token))
		}
		if r := api("GET", "/api/v1/organization/settings", rs.token, ""); r.status != 200 || r.json(t)["zusDay"] != 20.0 || r.json(t)["riskWorkingDays"] != 3.0 {
			t.Fatalf("defaults: %d %s", r.status, r.body)
		}
		for body, field := range map[string]string{`{"zusDay": 10}`: "zusDay", `{"zusDay": "15"}`: "zusDay", `{"zusDay": null}`: "zusDay",
			`{"riskWorkingDays": -1}`: "riskWorkingDays", `{"riskWorkingDays": 31}`: "riskWorkingDays", `{"riskWorkingDays": 1.5}`: "riskWorkingDays",
			`{"zusDay": 15, "riskWorkingDays": 99}`: "riskWorkingDays"} {
			if r := api("PATCH", "/api/v1/organization/settings", rs.token, body); r.status != 422 || fieldsOf(t, r)[field] == nil {
				t.Errorf("PATCH %s: %d %s", body, r.status, r.body)
			}
		}
		if r := api("GET", "/api/v1/organization/settings", rs.token, ""); r.json(t)["zusDay"] != 20.0 || r.json(t)["riskWorkingDays"] != 3.0 {
			t.Fatalf("a refused change was stored: %s", r.body)
		}
		if r := api("PATCH", "/api/v1/organization/settings", rs.accountantToken, `{"zusDay": 15}`); r.status != 403 {
			t.Errorf("accountant sets the ZUS day: %d", r.status)
		}
		if r := api("PATCH", "/api/v1/organization/settings", rs.token, `{"zusDay": 15, "riskWorkingDays": 0}`); r.status != 200 || r.json(t)["zusDay"] != 15.0 || r.json(t)["riskWorkingDays"] != 0.0 || r.json(t)["bulkRate"] != 20.0 {
			t.Fatalf("set 15/0: %d %s", r.status, r.body)
		}
		if d, err := db.DeadlineRules(t.Context(), rs.org); err != nil || d.ZUSDay != 15 || d.RiskWorkingDays != 0 {
			t.Fatalf("stored %+v %v", d, err)
		}
		var audited []string
		if err := db.Conn(t.Context()).Raw("SELECT CAST(details AS TEXT) FROM audit_log WHERE organization_id = ? AND action = ?", rs.org, "organization.rules_updated").Scan(&audited).Error; err != nil {
			t.Fatal(err)
		}
		if len(audited) != 1 || !strings.Contains(strings.ReplaceAll(audited[0], " ", ""), `"zusDay":15`) || !strings.Contains(strings.ReplaceAll(audited[0], " ", ""), `"riskWorkingDays":0`) {
			t.Errorf("audit: %q", audited)
		}
		if d, _ := db.DeadlineRules(t.Context(), other.org); d.ZUSDay != 20 || d.RiskWorkingDays != 3 {
			t.Errorf("another organization's rules changed: %+v", d)
		}

		// The rules page: the fields show the values; a bad one is the form again (422) with
		// its message, nothing stored; a good one is stored.
		admin, csrf := a.browser(rs.tenant)
		page := do(t, admin, "GET", a.srv.URL+"/settings/rules", "", nil)
		if page.status != 200 || !strings.Contains(page.body, `data-testid="rules-zusday"`) || !strings.Contains(page.body, `data-testid="rules-riskdays"`) {
			t.Fatalf("rules page: %d", page.status)
		}
		for _, bad := range []url.Values{{"zusDay": {"21"}}, {"riskWorkingDays": {"31"}}, {"riskWorkingDays": {"trzy"}}, {"zusDay": {"20"}, "riskWorkingDays": {""}}} {
			bad.Set("accountantsMayFix", "true")
			r := postForm(t, admin, csrf, a.srv.URL+"/settings/rules", bad)
			if r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, `data-testid="field-error"`) || !strings.Contains(r.body, `aria-invalid="true"`) {
				t.Errorf("form %v: %d", bad, r.status)
			}
		}
		if d, _ := db.DeadlineRules(t.Context(), rs.org); d.ZUSDay != 15 || d.RiskWorkingDays != 0 {
			t.Fatalf("a refused form stored %+v", d)
		}
		if r := postForm(t, admin, csrf, a.srv.URL+"/settings/rules", url.Values{"accountantsMayFix": {"true"}, "zusDay": {"20"}, "riskWorkingDays": {"5"}}); r.status != http.StatusSeeOther {
			t.Fatalf("form 20/5: %d", r.status)
		}
		if d, _ := db.DeadlineRules(t.Context(), rs.org); d.ZUSDay != 20 || d.RiskWorkingDays != 5 {
			t.Fatalf("form stored %+v", d)
		}
		acc, accCSRF := a.browser(rs.accountant)
		if r := postForm(t, acc, accCSRF, a.srv.URL+"/settings/rules", url.Values{"riskWorkingDays": {"7"}}); r.status != http.StatusForbidden {
			t.Errorf("accountant's form: %d", r.status)
		}
	})
}
