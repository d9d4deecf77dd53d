package handlers_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestAnalytics: through the router, GET /api/v1/analytics answers the organization's figures
// (the tenant's dead letter counted, another organization's not) to admins and accountants,
// refuses viewers (403), and refuses a bad range or filter with a 422 naming the key; the
// page (Polish) leads with the recommendations and figures, draws its charts as SVG with
// their tables, its GET form's fields are the API's keys, a bad value is the form again
// (422) with its message; each table exports as CSV; viewers get no page.
func TestAnalytics(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Analityczne")
		other := a.tenant("Inne Biuro Analityczne")
		for _, org := range []string{rs.org, other.org} {
			if _, err := db.RefreshAnalytics(t.Context(), org); err != nil {
				t.Fatal(err)
			}
		}
		api := func(path, token string) resp {
			return do(t, http.DefaultClient, "GET", a.srv.URL+path, "", bearer(token))
		}
		r := api("/api/v1/analytics?range=7", rs.token)
		if r.status != 200 {
			t.Fatalf("admin: %d %s", r.status, r.body)
		}
		body := r.json(t)
		for _, k := range []string{"failures", "byWorkflow", "byStep", "byErrorType", "byCode", "byHost", "byGroup", "timeToResolution",
			"recoveryRate", "autoRecoveryRate", "retriesThatPaid", "breakerOpenings", "recommendations", "dlq", "asOf", "previous"} {
			if _, ok := body[k]; !ok {
				t.Errorf("no %q in %s", k, r.body)
			}
		}
		if days := body["failures"].([]any); len(days) != 7 {
			t.Errorf("7 days: %d", len(days))
		}
		arrivals := 0.0
		for _, d := range body["dlq"].([]any) {
			arrivals += d.(map[string]any)["arrivals"].(float64)
		}
		if arrivals != 1 { // the tenant's own dead letter; the other organization's is its own
			t.Errorf("arrivals %v, want 1: %s", arrivals, r.body)
		}
		if r := api("/api/v1/analytics", rs.accountantToken); r.status != 200 {
			t.Errorf("accountant: %d", r.status)
		}
		if r := api("/api/v1/analytics", rs.viewerToken); r.status != 403 {
			t.Errorf("viewer: %d", r.status)
		}
		for q, field := range map[string]string{"range=14": "range", "from=2026-13-01": "from", "from=2026-11-10&to=2026-11-01": "to",
			"workflowId=abc": "workflowId", "errorType=nope": "errorType", "range=custom": "from", "from=2020-01-01&to=2026-01-01": "from",
			"stepId=a%20b": "stepId", "client=%00": "client"} {
			if r := api("/api/v1/analytics?"+q, rs.token); r.status != 422 || fieldsOf(t, r)[field] == nil {
				t.Errorf("%s: %d %s", q, r.status, r.body)
			}
		}
		// Another organization's workflow filters to nothing of its own.
		if r := api("/api/v1/analytics?workflowId="+rs.wf, other.token); r.status != 200 || strings.Contains(r.body, rs.wf) {
			t.Errorf("another organization's workflow: %d %s", r.status, r.body)
		}

		// A problem whose title is the engine's (English) text reads in the page's language,
		// as on Problems.
		closed := `The period … is closed for client Kowalski Sp. z o.o. (closed by admin on … UTC); the step "…" posts to it and was not run.`
		if n := db.Conn(t.Context()).Exec("UPDATE dlq_groups SET title = ? WHERE organization_id = ?", closed, rs.org).RowsAffected; n == 0 {
			t.Fatal("the tenant has no failure group")
		}
		admin, _ := a.browser(rs.tenant)
		page := do(t, admin, "GET", a.srv.URL+"/analytics?range=7", "", map[string]string{"Accept-Language": "pl"})
		if page.status != 200 {
			t.Fatalf("page: %d", page.status)
		}
		if groups := parseListDoc(t, page.body).testID("table-groups"); len(groups) != 1 {
			t.Errorf("%d problems' tables", len(groups))
		} else if text := groups[0].text(); !strings.Contains(text, "jest zamknięty dla klienta Kowalski Sp. z o.o.") || strings.Contains(text, "is closed") {
			t.Errorf("the problems' table: %q", text)
		}
		for _, want := range []string{`data-testid="analytics-advice"`, `data-testid="figure-failures"`, `data-testid="chart-failures"`,
			`data-testid="chart-dlq"`, `data-testid="chart-table-failures"`, `role="img"`, "<title id=\"failures-svg-title\">",
			`name="range"`, `name="from"`, `name="to"`, `name="workflowId"`, `name="stepId"`, `name="errorType"`, `name="client"`,
			`data-testid="csv-dlq"`, `data-testid="figure-trend">Poprzednie 7 dni: 0 (+`} {
			if !strings.Contains(page.body, want) {
				t.Errorf("page lacks %s", want)
			}
		}
		if !strings.Contains(page.body, `method="get" action="/analytics"`) {
			t.Error("the filter is not a GET form to /analytics")
		}
		if bad := do(t, admin, "GET", a.srv.URL+"/analytics?range=14", "", nil); bad.status != 422 || !strings.Contains(bad.body, `data-field="range"`) {
			t.Errorf("bad range: %d", bad.status)
		}
		if bad := do(t, admin, "GET", a.srv.URL+"/analytics?from=2026-11-10&to=2026-11-01", "", nil); bad.status != 422 || !strings.Contains(bad.body, `aria-invalid="true"`) {
			t.Errorf("to before from: %d", bad.status)
		}
		// The form sends the dates it showed: edited dates make the range custom; the same
		// dates with another range keep that range.
		shown := "&shownFrom=2026-10-27&shownTo=2026-11-25"
		if r := do(t, admin, "GET", a.srv.URL+"/analytics?range=30&from=2026-11-01&to=2026-11-10"+shown, "", nil); r.status != 200 ||
			!strings.Contains(r.body, `<option value="custom" selected>`) || !strings.Contains(r.body, `name="from" type="date" value="2026-11-01"`) {
			t.Errorf("edited dates: %d, custom selected %v", r.status, strings.Contains(r.body, `<option value="custom" selected>`))
		}
		if r := do(t, admin, "GET", a.srv.URL+"/analytics?range=7&from=2026-10-27&to=2026-11-25"+shown, "", nil); r.status != 200 ||
			!strings.Contains(r.body, `<option value="7" selected>`) || strings.Contains(r.body, `value="2026-10-27"`) {
			t.Errorf("range changed, dates as shown: %d, 7 selected %v", r.status, strings.Contains(r.body, `<option value="7" selected>`))
		}
		csv := do(t, admin, "GET", a.srv.URL+"/analytics/export.csv?range=7&table=dlq", "", nil)
		lines := strings.Split(strings.TrimPrefix(csv.body, "\ufeff"), "\n")
		if csv.status != 200 || !strings.HasPrefix(csv.header.Get("Content-Type"), "text/csv") || len(lines) < 8 {
			t.Fatalf("csv: %d %q", csv.status, csv.body)
		}
		if bad := do(t, admin, "GET", a.srv.URL+"/analytics/export.csv?table=nope", "", nil); bad.status != 422 {
			t.Errorf("unknown table: %d", bad.status)
		}
		viewer, _ := a.browser(rs.viewer)
		if r := do(t, viewer, "GET", a.srv.URL+"/analytics", "", nil); r.status != 403 {
			t.Errorf("viewer's page: %d", r.status)
		}
		accountant, _ := a.browser(rs.accountant)
		if r := do(t, accountant, "GET", a.srv.URL+"/analytics", "", nil); r.status != 200 || !strings.Contains(r.body, `data-testid="chart-failures"`) {
			t.Errorf("accountant's page: %d", r.status)
		}
	})
}

// TestAnalyticsAdviceCap: the page advises on the five worst steps' error rates and says how
// many more cross the threshold in one line (in Polish, with its plural); the API answers
// all seven.
func TestAnalyticsAdviceCap(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Siedmiu Kroków")
		now := time.Now().UTC()
		timeout := "timeout"
		// Seven steps of 20 attempts each; step k fails k+2 times (10 % … 40 %).
		for k := range 7 {
			for n := 1; n <= 20; n++ {
				s := models.StepAttempt{ID: models.NewID(), OrganizationID: tn.org, ExecutionID: tn.execID, StepID: fmt.Sprintf("krok%d", k),
					Attempt: n, Status: models.StepSucceeded, IdempotencyKey: models.NewID(), Input: models.JSON(`{}`), ScheduledAt: now,
					StartedAt: &now, FinishedAt: &now, CreatedAt: now, UpdatedAt: now}
				if n <= k+2 {
					s.Status, s.ErrorType = models.StepRetrying, &timeout
				}
				if err := db.Conn(t.Context()).Create(&s).Error; err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := db.RefreshAnalytics(t.Context(), tn.org); err != nil {
			t.Fatal(err)
		}
		r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/analytics?range=7", "", bearer(tn.token))
		steps := 0
		for _, x := range r.json(t)["recommendations"].([]any) {
			if x.(map[string]any)["code"] == "step_error_rate" {
				steps++
			}
		}
		if r.status != 200 || steps != 7 {
			t.Errorf("API: %d, %d step rates, want 7", r.status, steps)
		}
		admin, _ := a.browser(tn)
		page := do(t, admin, "GET", a.srv.URL+"/analytics?range=7", "", map[string]string{"Accept-Language": "pl"})
		if n := strings.Count(page.body, `data-code="step_error_rate"`); n != 5 {
			t.Errorf("the page advises on %d steps, want 5", n)
		}
		if !strings.Contains(page.body, "Jeszcze 2 kroki zawodzą w ponad 5 % prób") {
			t.Error("no line for the two more steps")
		}
		// The worst first, with its figure and its sample.
		if i := strings.Index(page.body, `data-code="step_error_rate"`); i < 0 || !strings.Contains(page.body[i:min(len(page.body), i+300)], "krok6: błędem zakończyło się 40,0 % prób (8 z 20)") {
			t.Error("the worst step is not advised on first with its figure and sample")
		}
	})
}
