package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/steps"
)

// TestLandedCommitRunsOnlyItsOwnClaim: a commit that seemed to fail (the connection broke)
// but landed left the next attempt claimed for this worker. After a long outage its lease
// may have run out: the reconciler moved it to the next generation and another worker may
// hold it now. landedNext says "yours" only for the claim the commit made itself.
func TestLandedCommitRunsOnlyItsOwnClaim(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		e := New(db, steps.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)), Config{Queue: &jobLog{}})
		org := models.Organization{ID: models.NewID(), Name: "Biuro"}
		if err := db.Conn(ctx).Create(&org).Error; err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		wf := models.Workflow{ID: models.NewID(), OrganizationID: org.ID, Name: "W", Version: 1, Definition: models.JSON(`{}`),
			UnknownErrors: "retry", WebhookToken: models.NewID(), WebhookSecret: "x", CreatedAt: now, UpdatedAt: now}
		ex := models.Execution{ID: models.NewID(), OrganizationID: org.ID, WorkflowID: wf.ID, WorkflowVersion: 1, Status: models.ExecRunning,
			Input: models.JSON(`{}`), TriggerType: "api", CorrelationID: models.NewID(), CreatedAt: now, UpdatedAt: now}
		if err := db.Conn(ctx).Create(&wf).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Conn(ctx).Create(&ex).Error; err != nil {
			t.Fatal(err)
		}
		attempt := func(status string, generation int) string {
			a := models.StepAttempt{ID: models.NewID(), OrganizationID: org.ID, ExecutionID: ex.ID, StepID: models.NewID(), Attempt: 1, Status: status,
				Generation: generation, IdempotencyKey: models.NewID(), ScheduledAt: now, CreatedAt: now, UpdatedAt: now}
			if err := db.Conn(ctx).Create(&a).Error; err != nil {
				t.Fatal(err)
			}
			return a.ID
		}
		cases := []struct {
			name       string
			status     string
			generation int
			claim      bool
			want       bool
		}{
			{"the commit's own claim", models.StepRunning, firstGeneration, true, true},
			{"reclaimed and held by another worker", models.StepRunning, firstGeneration + 1, true, false},
			{"reclaimed, waiting for its job", models.StepPending, firstGeneration + 1, true, false},
			{"not claimed by the commit: a worker took its job", models.StepRunning, firstGeneration, false, false},
			{"finished by then", models.StepSucceeded, firstGeneration, true, false},
		}
		for _, c := range cases {
			next, mine, err := e.attempts.landedNext(ctx, attempt(c.status, c.generation), c.claim)
			if err != nil || next == nil || mine != c.want {
				t.Errorf("%s: mine %v, want %v (%v)", c.name, mine, c.want, err)
			}
		}
		if next, mine, err := e.attempts.landedNext(ctx, models.NewID(), true); next != nil || mine || err != nil {
			t.Errorf("no next attempt: %v %v %v", next, mine, err)
		}
	})
}

// TestAttemptOfAMissingStepEnds: an attempt that names a step its definition does not have
// at its index (corrupt data) ends, with its execution, instead of failing its job again
// and again (the reconciler would re-queue it forever).
func TestAttemptOfAMissingStepEnds(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		e := New(db, steps.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)), Config{Queue: &jobLog{}})
		org := models.Organization{ID: models.NewID(), Name: "Biuro"}
		now := time.Now().UTC().Add(-time.Minute)
		def := models.JSON(`{"name": "W", "steps": [{"id": "t", "type": "transform", "config": {"output": 1}}]}`)
		wf := models.Workflow{ID: models.NewID(), OrganizationID: org.ID, Name: "W", Version: 1, Definition: def,
			UnknownErrors: "retry", WebhookToken: models.NewID(), WebhookSecret: "x", CreatedAt: now, UpdatedAt: now}
		ex := models.Execution{ID: models.NewID(), OrganizationID: org.ID, WorkflowID: wf.ID, WorkflowVersion: 1, Status: models.ExecRunning,
			Input: models.JSON(`{}`), TriggerType: "api", CorrelationID: models.NewID(), CreatedAt: now, UpdatedAt: now}
		var rows []any
		rows = append(rows, &org, &wf, &models.WorkflowVersion{ID: models.NewID(), OrganizationID: org.ID, WorkflowID: wf.ID, Version: 1, Definition: def, CreatedAt: now}, &ex)
		for i, c := range []struct {
			step  string
			index int
		}{{"gone", 5}, {"t", -1}, {"other", 0}} {
			rows = append(rows, &models.StepAttempt{ID: fmt.Sprintf("00000000-0000-4000-8000-00000000000%d", i+1), OrganizationID: org.ID, ExecutionID: ex.ID,
				StepID: c.step, StepIndex: c.index, Attempt: 1, Status: models.StepPending, Generation: firstGeneration,
				IdempotencyKey: models.NewID(), ScheduledAt: now, CreatedAt: now, UpdatedAt: now})
		}
		for _, r := range rows {
			if err := db.Conn(ctx).Create(r).Error; err != nil {
				t.Fatal(err)
			}
		}
		for i := range 3 {
			id := fmt.Sprintf("00000000-0000-4000-8000-00000000000%d", i+1)
			out, err := e.RunAttempt(ctx, id, firstGeneration)
			if err != nil || out != OutcomeFailed {
				t.Fatalf("attempt %d: %v %v, want failed", i, out, err)
			}
			if out, err := e.RunAttempt(ctx, id, firstGeneration); err != nil || out != OutcomeSkipped {
				t.Fatalf("attempt %d again: %v %v, want skipped", i, out, err)
			}
			var a models.StepAttempt
			db.Conn(ctx).First(&a, "id = ?", id)
			if a.Status != models.StepFailed || a.ErrorCode == nil || *a.ErrorCode != "STEP_MISSING" {
				t.Fatalf("attempt %d: %s %v", i, a.Status, a.ErrorCode)
			}
		}
		var got models.Execution
		db.Conn(ctx).First(&got, "id = ?", ex.ID)
		if got.Status != models.ExecFailed || got.FinishedAt == nil {
			t.Fatalf("execution %s", got.Status)
		}
	})
}
