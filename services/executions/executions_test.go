package executions_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/executions"
	"lifeline/services/redact"
	"lifeline/services/steps"
	"lifeline/services/workflows"
)

// TestDetailMaskedAndScoped: an execution's detail has its input and its attempts' inputs
// and outputs masked, its steps in the definition's order with their attempts; another
// organization's execution is not found.
func TestDetailMaskedAndScoped(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		org, other := models.Organization{ID: models.NewID(), Name: "Biuro A"}, models.Organization{ID: models.NewID(), Name: "Biuro B"}
		for _, o := range []*models.Organization{&org, &other} {
			if err := db.Conn(ctx).Create(o).Error; err != nil {
				t.Fatal(err)
			}
		}
		wfs := &workflows.Service{DB: db, Steps: steps.Builtins(http.DefaultClient)}
		wf, err := wfs.Create(ctx, org.ID, audit.System, []byte(`{"name": "VAT", "steps": [
		  {"id": "a", "type": "transform", "config": {"output": 1}}, {"id": "b", "type": "transform", "config": {"output": 2}}]}`))
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		ex := models.Execution{ID: models.NewID(), OrganizationID: org.ID, WorkflowID: wf.ID, WorkflowVersion: wf.Version,
			Status: models.ExecRunning, Input: models.JSON(`{"nip": "123", "password": "hunter2"}`), TriggerType: "api",
			CorrelationID: models.NewID(), CreatedAt: now}
		if err := db.Conn(ctx).Create(&ex).Error; err != nil {
			t.Fatal(err)
		}
		at := models.StepAttempt{ID: models.NewID(), OrganizationID: org.ID, ExecutionID: ex.ID, StepID: "a", Attempt: 1,
			Status: models.StepSucceeded, IdempotencyKey: ex.ID + ":a:1", Input: models.JSON(`{"token": "s3cret"}`),
			Output: models.JSON(`{"apiKey": "k3y", "ok": true}`), ScheduledAt: now, CreatedAt: now, UpdatedAt: now}
		if err := db.Conn(ctx).Create(&at).Error; err != nil {
			t.Fatal(err)
		}
		svc := executions.New(db, nil, redact.New(nil))
		d, err := svc.Detail(ctx, org.ID, ex.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.WorkflowName != "VAT" || len(d.Steps) != 2 || d.Steps[0].Step.ID != "a" || len(d.Steps[0].Attempts) != 1 || len(d.Steps[1].Attempts) != 0 {
			t.Fatalf("detail: %+v", d)
		}
		shown := string(d.Ex.Input) + string(d.Steps[0].Attempts[0].Input) + string(d.Steps[0].Attempts[0].Output)
		for _, secret := range []string{"hunter2", "s3cret", "k3y"} {
			if strings.Contains(shown, secret) {
				t.Fatalf("%q shown: %s", secret, shown)
			}
		}
		if !strings.Contains(shown, "123") || !strings.Contains(shown, "true") {
			t.Fatalf("more than the secrets masked: %s", shown)
		}
		if st := d.Steps[1].Status(d.Ex); st != models.StepPending {
			t.Fatalf("step b of a running execution: %s", st)
		}
		if _, err := svc.Detail(ctx, other.ID, ex.ID); apperr.ErrorCode(err) != apperr.ENOTFOUND {
			t.Fatalf("another organization's execution: %v", err)
		}
	})
}
