package engine_test

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
	"lifeline/services/engine"
	"lifeline/services/steps"
)

// rows inserts rows in order.
func rows(t *testing.T, db *models.DB, rs ...any) {
	t.Helper()
	for _, r := range rs {
		if err := db.Conn(context.Background()).Create(r).Error; err != nil {
			t.Fatal(err)
		}
	}
}

// TestPoisonedRowIsQuarantined: a RUNNING attempt past its lease whose execution names a
// workflow version that does not exist cannot be settled. It sorts first; before, the
// reconciler returned on it every pass and never reached the other rows. Now it is
// quarantined (kept, audited once, left out of later passes) and the pass goes on: the
// attempt behind it is reclaimed. Released, it is tried again.
func TestPoisonedRowIsQuarantined(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		eng, _, _, err := newStackWith(db, testLogger(t), steps.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		org := models.Organization{ID: models.NewID(), Name: "Biuro"}
		now := time.Now().UTC()
		def := models.JSON(`{"name": "W", "steps": [{"id": "t", "type": "transform", "config": {"output": 1}}]}`)
		wf := models.Workflow{ID: models.NewID(), OrganizationID: org.ID, Name: "W", Version: 1, Definition: def,
			UnknownErrors: "retry", WebhookToken: models.NewID(), WebhookSecret: "x", CreatedAt: now, UpdatedAt: now}
		execution := func(version int) *models.Execution {
			return &models.Execution{ID: models.NewID(), OrganizationID: org.ID, WorkflowID: wf.ID, WorkflowVersion: version, Status: models.ExecRunning,
				Input: models.JSON(`{}`), TriggerType: "api", CorrelationID: models.NewID(), CreatedAt: now, UpdatedAt: now}
		}
		broken, fine := execution(99), execution(1)
		running := func(ex *models.Execution, reclaims int, leaseEnded time.Duration) *models.StepAttempt {
			started, lease := now.Add(-time.Hour), now.Add(-leaseEnded)
			return &models.StepAttempt{ID: models.NewID(), OrganizationID: org.ID, ExecutionID: ex.ID, StepID: "t", Attempt: 1, Status: models.StepRunning,
				Generation: 1, Reclaims: reclaims, IdempotencyKey: models.NewID(), ScheduledAt: started, StartedAt: &started, LeaseExpiresAt: &lease,
				CreatedAt: started, UpdatedAt: started}
		}
		poison, good := running(broken, engine.MaxReclaims-1, 2*time.Minute), running(fine, 0, time.Minute)
		rows(t, db, &org, &wf, &models.WorkflowVersion{ID: models.NewID(), OrganizationID: org.ID, WorkflowID: wf.ID, Version: 1, Definition: def, CreatedAt: now},
			broken, fine, poison, good)

		for pass := range 2 {
			if _, err := eng.Reconcile(ctx); err != nil {
				t.Fatalf("pass %d: %v", pass, err)
			}
		}
		var g models.StepAttempt
		db.Conn(ctx).First(&g, "id = ?", good.ID)
		if g.Reclaims != 1 || g.Status != models.StepPending {
			t.Fatalf("the attempt behind the poisoned one: %s, %d reclaims", g.Status, g.Reclaims)
		}
		qs, err := db.QuarantinedRows(ctx, org.ID, 10)
		if err != nil || len(qs) != 1 || qs[0].RowID != poison.ID || qs[0].Table != "step_executions" || qs[0].ExecutionID == nil || *qs[0].ExecutionID != broken.ID {
			t.Fatalf("quarantined %+v %v", qs, err)
		}
		var p models.StepAttempt
		db.Conn(ctx).First(&p, "id = ?", poison.ID)
		if p.Status != models.StepRunning || p.Reclaims != engine.MaxReclaims-1 {
			t.Fatalf("the quarantined row changed: %s %d", p.Status, p.Reclaims)
		}
		var audited int64
		db.Conn(ctx).Model(&models.AuditEntry{}).Where("organization_id = ? AND action = ?", org.ID, "reconcile.quarantined").Count(&audited)
		if audited != 1 {
			t.Fatalf("audited %d times, want once", audited)
		}
		// Released, the next pass tries it again (and quarantines it again: it is still broken).
		if err := db.Tx(ctx, func(tx *gorm.DB) error { _, err := db.ReleaseQuarantined(tx, org.ID, qs[0].ID); return err }); err != nil {
			t.Fatal(err)
		}
		if _, err := eng.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		db.Conn(ctx).Model(&models.AuditEntry{}).Where("organization_id = ? AND action = ?", org.ID, "reconcile.quarantined").Count(&audited)
		if audited != 2 {
			t.Fatalf("after a release: audited %d times, want 2", audited)
		}
		if _, err := db.ReleaseQuarantined(db.Conn(ctx), models.NewID(), qs[0].ID); !models.IsNotFound(err) && !isNotFoundErr(err) {
			t.Fatalf("another organization released it: %v", err)
		}
	})
}

func isNotFoundErr(err error) bool {
	me, ok := err.(*apperr.Error)
	return ok && me.Code == apperr.ENOTFOUND
}

// TestCompensationBacklogKeepsItsPlace: a compensation due long ago whose job still waits
// in the queue (a backlog) is left alone by the reconciler (moving it to the next generation
// would put it at the back of the queue again and again); one with no job is queued again.
func TestCompensationBacklogKeepsItsPlace(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		eng, runner, _, err := newStackWith(db, testLogger(t), steps.NewRegistry()) // not started: its queue is a backlog
		if err != nil {
			t.Fatal(err)
		}
		org := models.Organization{ID: models.NewID(), Name: "Biuro"}
		now := time.Now().UTC()
		wf := models.Workflow{ID: models.NewID(), OrganizationID: org.ID, Name: "W", Version: 1, Definition: models.JSON(`{}`),
			UnknownErrors: "retry", WebhookToken: models.NewID(), WebhookSecret: "x", CreatedAt: now, UpdatedAt: now}
		ex := models.Execution{ID: models.NewID(), OrganizationID: org.ID, WorkflowID: wf.ID, WorkflowVersion: 1, Status: models.ExecDLQPending,
			Input: models.JSON(`{}`), TriggerType: "api", CorrelationID: models.NewID(), CreatedAt: now, UpdatedAt: now}
		due := now.Add(-time.Minute)
		comp := func(pos int) *models.CompensationAction {
			pending := models.CompPending
			return &models.CompensationAction{ID: models.NewID(), OrganizationID: org.ID, WorkflowID: wf.ID, StepID: "s", Position: pos,
				CompensationType: "api_call", CompensationConfig: models.JSON(`{}`), ExecutionID: &ex.ID, Status: &pending, Generation: 1,
				ScheduledAt: &due, CreatedAt: due, UpdatedAt: due}
		}
		queued, lost := comp(0), comp(1)
		rows(t, db, &org, &wf, &ex, queued, lost)
		if err := runner.Queue().Enqueue(ctx, []engine.Job{{CompensationID: queued.ID, Generation: 1, RunAt: due}}); err != nil {
			t.Fatal(err)
		}
		if _, err := eng.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		gen := func(id string) int {
			var c models.CompensationAction
			db.Conn(ctx).First(&c, "id = ?", id)
			return c.Generation
		}
		if g := gen(queued.ID); g != 1 {
			t.Errorf("the compensation waiting in the queue was moved to generation %d", g)
		}
		if g := gen(lost.ID); g != 2 {
			t.Errorf("the compensation with no job is at generation %d, want 2", g)
		}
	})
}
