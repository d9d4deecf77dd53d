package engine

import (
	"context"
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
		e := New(db, steps.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)), Config{})
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
			next, mine, err := e.landedNext(ctx, attempt(c.status, c.generation), c.claim)
			if err != nil || next == nil || mine != c.want {
				t.Errorf("%s: mine %v, want %v (%v)", c.name, mine, c.want, err)
			}
		}
		if next, mine, err := e.landedNext(ctx, models.NewID(), true); next != nil || mine || err != nil {
			t.Errorf("no next attempt: %v %v %v", next, mine, err)
		}
	})
}
