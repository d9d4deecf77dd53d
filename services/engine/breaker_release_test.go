package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/breaker"
	"lifeline/services/steps"
)

// jobLog is a queue that records the jobs it is given, and queues nothing.
type jobLog struct {
	mu   sync.Mutex
	jobs []Job
}

func (q *jobLog) add(jobs []Job) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.jobs = append(q.jobs, jobs...)
}

func (q *jobLog) EnqueueTx(_ context.Context, _ *gorm.DB, jobs []Job) (func(context.Context) error, error) {
	q.add(jobs)
	return nil, nil
}
func (q *jobLog) Enqueue(_ context.Context, jobs []Job) error { q.add(jobs); return nil }
func (q *jobLog) EnqueuePgx(_ context.Context, _ pgx.Tx, jobs []Job) error {
	q.add(jobs)
	return nil
}

// TestBreakerResetReleasesInBatches: an admin's reset of a breaker 1,100 attempts wait on
// releases them all, 10 a second in the order they waited, with one set-based UPDATE per
// batch of releaseBatch (3 statements, the first in the reset's own transaction), not one
// UPDATE per attempt.
func TestBreakerResetReleasesInBatches(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		const waitingN = 1100
		ctx := context.Background()
		q := &jobLog{}
		e := New(db, steps.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)), Config{Queue: q})
		now, err := db.Now(ctx)
		if err != nil {
			t.Fatal(err)
		}
		org := models.Organization{ID: models.NewID(), Name: "Biuro"}
		wf := models.Workflow{ID: models.NewID(), OrganizationID: org.ID, Name: "W", Version: 1, Definition: models.JSON(`{}`),
			UnknownErrors: "retry", WebhookToken: models.NewID(), WebhookSecret: "x", CreatedAt: now, UpdatedAt: now}
		ex := models.Execution{ID: models.NewID(), OrganizationID: org.ID, WorkflowID: wf.ID, WorkflowVersion: 1, Status: models.ExecRunning,
			Input: models.JSON(`{}`), TriggerType: "api", CorrelationID: models.NewID(), CreatedAt: now, UpdatedAt: now}
		for _, row := range []any{&org, &wf, &ex} {
			if err := db.Conn(ctx).Create(row).Error; err != nil {
				t.Fatal(err)
			}
		}
		host := "bank.example"
		b := models.CircuitBreaker{ID: models.NewID(), OrganizationID: org.ID, ScopeKey: "host:" + host, Host: &host, State: breaker.Closed,
			FailureThreshold: 5, ResetTimeoutMs: 60_000, HalfOpenRequests: 3, CreatedAt: now, UpdatedAt: now}
		if err := db.Conn(ctx).Create(&b).Error; err != nil {
			t.Fatal(err)
		}
		id := b.ID
		if _, err := e.ActOnBreaker(ctx, BreakerAction{OrganizationID: org.ID, BreakerID: id, Open: true, Reason: "bank down", Actor: audit.System}); err != nil {
			t.Fatal(err)
		}
		waiting := make([]models.StepAttempt, waitingN)
		for i := range waiting {
			at := now.Add(time.Duration(i) * time.Millisecond)
			waiting[i] = models.StepAttempt{ID: models.NewID(), OrganizationID: org.ID, ExecutionID: ex.ID, StepID: fmt.Sprintf("s%d", i), Attempt: 1,
				Status: models.StepPending, Generation: 2, IdempotencyKey: models.NewID(), ScheduledAt: now.Add(time.Hour), WaitingBreakerID: &id,
				CreatedAt: at, UpdatedAt: at}
		}
		if err := db.Conn(ctx).CreateInBatches(waiting, 200).Error; err != nil {
			t.Fatal(err)
		}

		var updates atomic.Int64
		count := func(tx *gorm.DB) {
			if strings.HasPrefix(strings.TrimSpace(tx.Statement.SQL.String()), "UPDATE step_executions") {
				updates.Add(1)
			}
		}
		cb := db.Gorm.Callback()
		for name, err := range map[string]error{
			"query": cb.Query().After("gorm:query").Register("count_updates_q", count),
			"row":   cb.Row().After("gorm:row").Register("count_updates_r", count),
			"raw":   cb.Raw().After("gorm:raw").Register("count_updates_x", count),
			"upd":   cb.Update().After("gorm:update").Register("count_updates_u", count),
		} {
			if err != nil {
				t.Fatal(name, err)
			}
		}
		if _, err := e.ActOnBreaker(ctx, BreakerAction{OrganizationID: org.ID, BreakerID: id, Reason: "bank back", Actor: audit.System}); err != nil {
			t.Fatal(err)
		}
		if n := updates.Load(); n != (waitingN+releaseBatch-1)/releaseBatch {
			t.Errorf("%d UPDATEs of attempts released %d, want %d (one per batch of %d)", n, waitingN, (waitingN+releaseBatch-1)/releaseBatch, releaseBatch)
		}
		var after []models.StepAttempt
		if err := db.Conn(ctx).Where("execution_id = ?", ex.ID).Order("scheduled_at").Find(&after).Error; err != nil {
			t.Fatal(err)
		}
		if len(after) != waitingN || len(q.jobs) != waitingN {
			t.Fatalf("%d attempts, %d jobs, want %d", len(after), len(q.jobs), waitingN)
		}
		first := after[0].ScheduledAt
		for i, a := range after {
			if a.WaitingBreakerID != nil || a.Generation != 3 || a.StepID != fmt.Sprintf("s%d", i) ||
				!a.ScheduledAt.Equal(first.Add(time.Duration(i)*releaseSpacing)) {
				t.Fatalf("attempt %d: %s at generation %d, due %v (waiting on %v); want s%d at generation 3, due %v",
					i, a.StepID, a.Generation, a.ScheduledAt, a.WaitingBreakerID, i, first.Add(time.Duration(i)*releaseSpacing))
			}
		}
		if !slices.IsSortedFunc(q.jobs[:releaseBatch], func(x, y Job) int { return x.RunAt.Compare(y.RunAt) }) {
			t.Error("the first batch's jobs are not in the order the attempts waited")
		}
	})
}
