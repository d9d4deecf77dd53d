package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
)

// An execution's page says each attempt out of the last its run may make by the step's
// effective retry policy (issue 21: "Attempt 2 of 5"), and, while the next one waits, how
// many were made, out of how many, and when the next runs, to the second.
func TestExecutionAttemptOfMax(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Próby")
		ctx := context.Background()
		wf, err := a.wfs.Create(ctx, tn.org, audit.System, []byte(fmt.Sprintf(`{"name": "Próby", "settings": {"retryPolicy": {"maxRetries": 1}},
		  "steps": [{"id": "submit", "name": "Wyślij", "type": "http", "retryPolicy": {"maxRetries": 4}, "config": {"method": "POST", "url": "%s/bad"}}]}`, a.ext.URL)))
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC().Truncate(time.Second)
		next := now.Add(90 * time.Second)
		step := "submit"
		ex := models.Execution{ID: models.NewID(), OrganizationID: tn.org, WorkflowID: wf.ID, WorkflowVersion: 1, Status: models.ExecRunning,
			Input: models.JSON(`{}`), TriggerType: "api", CorrelationID: models.NewID(), CurrentStepID: &step, StartedAt: &now, CreatedAt: now, UpdatedAt: now}
		if err := db.Conn(ctx).Create(&ex).Error; err != nil {
			t.Fatal(err)
		}
		typ, msg := "transient", "503 Service Unavailable"
		took := int64(420) // µs: the request's time, though started and finished read the same second
		for _, at := range []models.StepAttempt{
			{Attempt: 1, Status: models.StepRetrying, ScheduledAt: now, StartedAt: &now, FinishedAt: &now, ErrorType: &typ, ErrorMessage: &msg, DurationUs: &took},
			{Attempt: 2, Status: models.StepPending, ScheduledAt: next},
		} {
			at.ID, at.OrganizationID, at.ExecutionID, at.StepID, at.IdempotencyKey = models.NewID(), tn.org, ex.ID, step, models.NewID()
			at.CreatedAt, at.UpdatedAt = now, now
			if err := db.Conn(ctx).Create(&at).Error; err != nil {
				t.Fatal(err)
			}
		}
		b, _ := a.browser(tn)
		r := do(t, b, "GET", a.srv.URL+"/executions/"+ex.ID, "", map[string]string{"Accept-Language": "en"})
		doc := parseListDoc(t, r.body)
		var labels []string
		for _, n := range doc.testID("attempt-no") {
			labels = append(labels, strings.TrimSpace(n.text()))
		}
		// The step's policy (4 retries) wins over the workflow's (1): five attempts.
		if strings.Join(labels, "|") != "Attempt 1 of 5|Attempt 2 of 5" {
			t.Errorf("attempts read %q", labels)
		}
		nr := doc.testID("next-retry")
		if len(nr) != 1 || !strings.Contains(nr[0].text(), "Attempt 1 of 5 · next at ") || !strings.Contains(nr[0].text(), next.Format(":04:05")) {
			t.Errorf("next retry reads %q", texts(nr))
		}
		// The measured duration, not "0 ms"; in the API to the microsecond.
		if d := texts(doc.testID("attempt-duration")); len(d) == 0 || d[0] != "0.4 ms" {
			t.Errorf("durations read %q, want 0.4 ms first", d)
		}
		api := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions/"+ex.ID, "", bearer(tn.token))
		if !strings.Contains(api.body, `"durationMs":0.42`) {
			t.Errorf("API: %d %.400s", api.status, api.body)
		}
		// In Polish, with its decimal comma.
		r = do(t, b, "GET", a.srv.URL+"/executions/"+ex.ID, "", map[string]string{"Accept-Language": "pl"})
		pl := parseListDoc(t, r.body)
		if nr := pl.testID("next-retry"); len(nr) != 1 || !strings.Contains(nr[0].text(), "Próba 1 z 5 · następna o ") {
			t.Errorf("next retry in Polish reads %q", texts(nr))
		}
		if d := texts(pl.testID("attempt-duration")); len(d) == 0 || d[0] != "0,4 ms" {
			t.Errorf("Polish durations read %q, want 0,4 ms first", d)
		}
	})
}

func texts(ds []listDoc) []string {
	var out []string
	for _, d := range ds {
		out = append(out, strings.TrimSpace(d.text()))
	}
	return out
}

// TestItemPageShowsReplayAttempts: while a dead letter's replay waits for its next attempt,
// the item's own page says it as the execution's page does ("Attempt 1 of 5 · next at …",
// in the reader's language), names the step, and keeps refreshing itself (the refresh is
// the same page, which shows the result once the replay ends). Another organization's item
// is 404. Both databases.
func TestItemPageShowsReplayAttempts(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Powtórki")
		other := a.tenant("Biuro Obce Powtórki")
		ctx := context.Background()
		var calls atomic.Int32
		gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) == 1 { // the first run: a data error, to the DLQ at once
				http.Error(w, `{"error": "NIP must have 10 digits"}`, http.StatusBadRequest)
				return
			}
			http.Error(w, `{"error": "busy"}`, http.StatusServiceUnavailable) // the replay: retried later
		}))
		t.Cleanup(gw.Close)
		wf, err := a.wfs.Create(ctx, tn.org, audit.System, []byte(fmt.Sprintf(`{"name": "Wysyłka", "settings": {"retryPolicy": {"maxRetries": 4, "initialDelayMs": 300000, "maxDelayMs": 300000}},
		  "steps": [{"id": "submit", "name": "Wyślij do bramki", "type": "http", "config": {"method": "POST", "url": "%s/vat"}}]}`, gw.URL)))
		if err != nil {
			t.Fatal(err)
		}
		r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wf.ID+"/executions", `{"input": {}}`, bearer(tn.token))
		if r.status != http.StatusCreated {
			t.Fatalf("start: %d %s", r.status, r.body)
		}
		exID := r.json(t)["id"].(string)
		dl := waitFor(t, func() (string, bool) {
			var d models.DeadLetter
			err := db.Conn(ctx).Where("execution_id = ?", exID).First(&d).Error
			return d.ID, err == nil
		})
		if r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/dlq/"+dl+"/actions", `{"action": "retry"}`, bearer(tn.token)); r.status != http.StatusAccepted {
			t.Fatalf("retry: %d %s", r.status, r.body)
		}
		// The replay's first attempt fails (503): its next waits five minutes.
		waitFor(t, func() (string, bool) {
			var n int64
			db.Conn(ctx).Model(&models.StepAttempt{}).Where("organization_id = ? AND status = ? AND error_type IS NULL", tn.org, models.StepPending).Count(&n)
			return "", n == 1 && calls.Load() >= 2
		})
		b, _ := a.browser(tn)
		for _, c := range []struct{ lang, want string }{{"en", "Attempt 2 of 6 · next at "}, {"pl", "Próba 2 z 6 · następna o "}} {
			r := do(t, b, "GET", a.srv.URL+"/dlq/"+dl, "", map[string]string{"Accept-Language": c.lang})
			doc := parseListDoc(t, r.body)
			prog := doc.testID("replay-progress")
			if r.status != 200 || len(prog) != 1 || prog[0].attr("data-step-id") != "submit" || !strings.Contains(prog[0].text(), "Wyślij do bramki") {
				t.Fatalf("%s: %d, no replay progress naming the step: %q", c.lang, r.status, texts(doc.testID("replay-running")))
			}
			// As the execution's page says it (the first run's attempt and the replay's count).
			exec := parseListDoc(t, do(t, b, "GET", a.srv.URL+"/executions/"+exID, "", map[string]string{"Accept-Language": c.lang}).body).testID("next-retry")
			if nr := prog[0].testID("next-retry"); len(nr) != 1 || !strings.Contains(nr[0].text(), c.want) || len(exec) != 1 || exec[0].text() != nr[0].text() {
				t.Errorf("%s: the next attempt reads %q, the execution's page %q", c.lang, texts(nr), texts(exec))
			}
			live := doc.byID("dlq-live")
			if live == nil || listAttr(live, "hx-get") != "/dlq/"+dl || !strings.Contains(listAttr(live, "hx-trigger"), "every") {
				t.Errorf("%s: the page does not refresh itself while the replay runs", c.lang)
			}
		}
		oc, _ := a.browser(other)
		if r := do(t, oc, "GET", a.srv.URL+"/dlq/"+dl, "", nil); r.status != http.StatusNotFound {
			t.Errorf("another organization's item: %d", r.status)
		}
	})
}

// waitFor polls f until it reports done (at most 15 s) and returns its value.
func waitFor(t *testing.T, f func() (string, bool)) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if v, ok := f(); ok {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
