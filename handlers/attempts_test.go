package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
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
