package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestEscalationPolicy: the escalation policy through the API and the settings page, on both
// databases: empty by default; admins replace it (normalized, audited); bad levels are 422
// with the field named and nothing stored; accountants are refused (403); a level cannot
// name another organization's member; and a group that waited past a level (the database
// clock moved) says on its page who has it and since when, with a badge on the Problems
// view, which another organization cannot open (404).
func TestEscalationPolicy(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		clock := modeltest.Clock(t, db)
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Eskalacji")
		other := a.tenant("Inne Biuro Eskalacji")
		api := func(method, token, body string) resp {
			h := bearer(token)
			h["Content-Type"] = "application/json"
			return do(t, http.DefaultClient, method, a.srv.URL+"/api/v1/organization/escalation", body, h)
		}
		if r := api("GET", rs.token, ""); r.status != 200 || strings.TrimSpace(r.body) != `{"levels":[]}` {
			t.Fatalf("default policy: %d %s", r.status, r.body)
		}

		// Bad levels: 422 naming the field; nothing stored.
		for _, c := range []struct{ body, field string }{
			{`{"levels": [{"afterMs": 0, "to": ["role:admin"]}]}`, "levels[0].afterMs"},
			{`{"levels": [{"afterMs": -5, "to": ["role:admin"]}]}`, "levels[0].afterMs"},
			{`{"levels": [{"afterMs": 7200000, "to": ["role:admin"]}, {"afterMs": 3600000, "to": ["role:owner"]}]}`, "levels[1].afterMs"},
			{`{"levels": [{"afterMs": 3600000, "to": []}]}`, "levels[0].to"},
			{`{"levels": [{"afterMs": 3600000}]}`, "levels[0].to"},
			{`{"levels": [{"afterMs": 3600000, "to": ["role:viewer"]}]}`, "levels[0].to[0]"},
			{`{"levels": [{"afterMs": 3600000, "to": ["nobody@example.com"]}]}`, "levels[0].to[0]"},
			{`{"levels": [{"afterMs": 3600000, "to": ["` + other.email + `"]}]}`, "levels[0].to[0]"},
			{`{"levels": [{"afterMs": 99999999999, "to": ["role:admin"]}]}`, "levels[0].afterMs"},
			{`{"levels": [{"afterMs": "soon", "to": ["role:admin"]}]}`, "levels.afterMs"},
			{`{"levels": {}}`, "levels"},
			{`{"colour": 1}`, "body"},
			{`[]`, "body"},
		} {
			if r := api("PUT", rs.token, c.body); r.status != http.StatusUnprocessableEntity || fieldsOf(t, r)[c.field] == nil {
				t.Errorf("PUT %s: %d %s; want 422 naming %s", c.body, r.status, r.body, c.field)
			}
		}
		if r := api("GET", rs.token, ""); strings.TrimSpace(r.body) != `{"levels":[]}` {
			t.Fatalf("a refused policy was stored: %s", r.body)
		}

		// Roles: accountants neither read nor change it.
		if r := api("GET", rs.accountantToken, ""); r.status != http.StatusForbidden {
			t.Errorf("accountant reads the policy: %d", r.status)
		}
		if r := api("PUT", rs.accountantToken, `{"levels": [{"afterMs": 60000, "to": ["role:accountant"]}]}`); r.status != http.StatusForbidden {
			t.Errorf("accountant changes the policy: %d", r.status)
		}

		// An admin sets it: normalized (a bare role, a member's email in any case), audited.
		r := api("PUT", rs.token, `{"levels": [{"afterMs": 60000, "to": ["admin"]}, {"afterMs": 86400000, "to": ["role:owner", "`+strings.ToUpper(rs.accountant.email)+`"]}]}`)
		if want := `{"levels":[{"afterMs":60000,"to":["role:admin"]},{"afterMs":86400000,"to":["role:owner","` + rs.accountant.email + `"]}]}`; r.status != 200 || strings.TrimSpace(r.body) != want {
			t.Fatalf("PUT: %d %s, want %s", r.status, r.body, want)
		}
		var audited int64
		db.Conn(ctx).Model(&models.AuditEntry{}).Where("organization_id = ? AND action = ?", rs.org, "organization.escalation_updated").Count(&audited)
		if audited != 1 {
			t.Errorf("%d audit entries of the change, want 1", audited)
		}
		if r := api("GET", other.token, ""); strings.TrimSpace(r.body) != `{"levels":[]}` {
			t.Errorf("another organization sees the policy: %s", r.body)
		}

		// The settings page: admins only; it shows the levels, refuses a bad row (422 with its
		// message, nothing stored) and saves rows (an empty row left out).
		admin, csrf := a.browser(rs.tenant)
		page := do(t, admin, "GET", a.srv.URL+"/settings/escalation", "", nil)
		if page.status != 200 || !strings.Contains(page.body, `data-testid="escalation-form"`) || strings.Count(page.body, `data-testid="escalation-level"`) != 4 /* 2 levels, the empty row, the template */ {
			t.Fatalf("settings page: %d %.600s", page.status, page.body)
		}
		acc, _ := a.browser(rs.accountant)
		if r := do(t, acc, "GET", a.srv.URL+"/settings/escalation", "", nil); r.status != http.StatusForbidden {
			t.Errorf("accountant opens the settings page: %d", r.status)
		}
		bad := postForm(t, admin, csrf, a.srv.URL+"/settings/escalation", url.Values{
			"levels[0].after": {"2"}, "levels[0].unit": {"hours"}, "levels[0].to": {"role:admin"},
			"levels[1].after": {"1"}, "levels[1].unit": {"hours"}, "levels[1].to": {"role:owner"}})
		if bad.status != http.StatusUnprocessableEntity || !strings.Contains(bad.body, "must be longer than the level before") ||
			!strings.Contains(bad.body, `data-testid="escalation-error"`) {
			t.Fatalf("a decreasing level: %d %.2000s", bad.status, bad.body)
		}
		if r := api("GET", rs.token, ""); !strings.Contains(r.body, `"afterMs":60000`) {
			t.Fatalf("a refused form changed the policy: %s", r.body)
		}
		saved := postForm(t, admin, csrf, a.srv.URL+"/settings/escalation", url.Values{
			"levels[0].after": {"1"}, "levels[0].unit": {"minutes"}, "levels[0].to": {"role:admin"},
			"levels[1].after": {"1"}, "levels[1].unit": {"days"}, "levels[1].to": {"role:owner"}, "levels[1].remove": {"true"},
			"levels[2].after": {""}, "levels[2].unit": {"hours"}})
		if saved.status != http.StatusSeeOther {
			t.Fatalf("save: %d %.1000s", saved.status, saved.body)
		}
		if r := api("GET", rs.token, ""); strings.TrimSpace(r.body) != `{"levels":[{"afterMs":60000,"to":["role:admin"]}]}` {
			t.Fatalf("saved from the page: %s", r.body)
		}

		// A group waiting past the level: the page says who has it and since when.
		var group string
		if err := db.Conn(ctx).Model(&models.DeadLetter{}).Where("id = ?", rs.dlqID).Pluck("group_id", &group).Error; err != nil || group == "" {
			t.Fatalf("the item's group: %q %v", group, err)
		}
		clock.Advance(2 * time.Minute)
		if _, err := a.eng.Escalate(ctx); err != nil {
			t.Fatal(err)
		}
		gp := do(t, admin, "GET", a.srv.URL+"/dlq/groups/"+group, "", nil)
		if gp.status != 200 || !strings.Contains(gp.body, `data-testid="problem-escalation"`) || !strings.Contains(gp.body, "Escalated to: admins · since ") {
			t.Fatalf("the group's page does not say who has it: %d %.3000s", gp.status, gp.body)
		}
		if pr := do(t, admin, "GET", a.srv.URL+"/dlq", "", nil); !strings.Contains(pr.body, `data-testid="problem-escalated"`) {
			t.Errorf("the Problems view has no escalated badge")
		}
		g := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq/groups/"+group, "", bearer(rs.token)).json(t)
		if g["escalationLevel"] != float64(1) || g["escalatedAt"] == nil {
			t.Errorf("the group in the API: %v", g)
		}
		otherAdmin, _ := a.browser(other)
		if r := do(t, otherAdmin, "GET", a.srv.URL+"/dlq/groups/"+group, "", nil); r.status != http.StatusNotFound {
			t.Errorf("another organization opens the group: %d", r.status)
		}
	})
}
