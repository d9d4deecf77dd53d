package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/engine"
)

// TestHealthPageShowsAndReleasesQuarantinedRows: a row the reconciler could not settle is
// listed for the organization's admins on the health page (and in the API) with its reason
// and execution; an admin releases it there (audited); accountants get 403, another
// organization 404.
func TestHealthPageShowsAndReleasesQuarantinedRows(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Zdrowie")
		other := a.tenant("Biuro Obce Zdrowie")
		ctx := context.Background()
		// An attempt left running by a dead process, twice reclaimed already, whose execution
		// names a workflow version that does not exist: the reconciler cannot settle it.
		now := time.Now().UTC()
		ex := models.Execution{ID: models.NewID(), OrganizationID: rs.org, WorkflowID: rs.wf, WorkflowVersion: 99, Status: models.ExecRunning,
			Input: models.JSON(`{}`), TriggerType: "api", CorrelationID: models.NewID(), CreatedAt: now, UpdatedAt: now}
		started, lease := now.Add(-time.Hour), now.Add(-time.Minute)
		at := models.StepAttempt{ID: models.NewID(), OrganizationID: rs.org, ExecutionID: ex.ID, StepID: "file", StepIndex: 1, Attempt: 1,
			Status: models.StepRunning, Generation: 1, Reclaims: engine.MaxReclaims - 1, IdempotencyKey: models.NewID(), ScheduledAt: started,
			StartedAt: &started, LeaseExpiresAt: &lease, CreatedAt: started, UpdatedAt: started}
		for _, r := range []any{&ex, &at} {
			if err := db.Conn(ctx).Create(r).Error; err != nil {
				t.Fatal(err)
			}
		}
		if _, err := a.eng.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		admin, csrf := a.browser(rs.tenant)
		page := a.srv.URL + "/settings/health"
		r := do(t, admin, "GET", page, "", nil)
		doc := parseListDoc(t, r.body)
		rows := doc.testID("quarantine-row")
		if r.status != 200 || len(rows) != 1 || doc.testID("health-database")[0].attr("data-up") != "true" {
			t.Fatalf("health page: %d, %d rows", r.status, len(rows))
		}
		if reason := rows[0].testID("quarantine-reason")[0].text(); !strings.Contains(reason, "version 99") {
			t.Errorf("reason %q", reason)
		}
		if !strings.Contains(r.body, `href="/executions/`+ex.ID+`"`) {
			t.Error("the row does not link to its execution")
		}
		id := rows[0].attr("data-id")
		api := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/health/quarantine", "", bearer(rs.token)).json(t)
		if qs, _ := api["quarantined"].([]any); len(qs) != 1 || qs[0].(map[string]any)["id"] != id || api["databaseUp"] != true {
			t.Fatalf("API %v", api)
		}
		// Who may not: an accountant (403), another organization's admin (404).
		acc, accCSRF := a.browser(rs.accountant)
		if r := do(t, acc, "GET", page, "", nil); r.status != http.StatusForbidden {
			t.Errorf("accountant: %d", r.status)
		}
		release := a.srv.URL + "/settings/health/quarantine/" + id + "/release"
		if r := do(t, acc, "POST", release, url.Values{"_csrf": {accCSRF}}.Encode(), formHdr(nil)); r.status != http.StatusForbidden {
			t.Errorf("accountant's release: %d", r.status)
		}
		if r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/health/quarantine/"+id+"/release", "", bearer(other.token)); r.status != http.StatusNotFound {
			t.Errorf("another organization: %d", r.status)
		}
		// The admin releases it with the page's own form.
		form := rows[0].all(func(n *html.Node) bool { return n.Data == "form" })
		if len(form) != 1 || listAttr(form[0], "action") != "/settings/health/quarantine/"+id+"/release" {
			t.Fatalf("release form %v", form)
		}
		r = do(t, admin, "POST", a.srv.URL+listAttr(form[0], "action"), url.Values{"_csrf": {csrf}}.Encode(), formHdr(nil))
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/settings/health" {
			t.Fatalf("release: %d %s", r.status, r.header.Get("Location"))
		}
		if rows := parseListDoc(t, do(t, admin, "GET", page, "", nil).body).testID("quarantine-row"); len(rows) != 0 {
			t.Fatalf("still listed: %d", len(rows))
		}
		var audited int64
		db.Conn(ctx).Model(&models.AuditEntry{}).Where("organization_id = ? AND action = ?", rs.org, "quarantine.released").Count(&audited)
		if audited != 1 {
			t.Errorf("audited %d", audited)
		}
		if r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/health/quarantine/"+id+"/release", "", bearer(rs.token)); r.status != http.StatusNotFound {
			t.Errorf("released twice: %d", r.status)
		}
	})
}
