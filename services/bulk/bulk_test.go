package bulk_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/bulk"
	"lifeline/services/engine"
)

// recorder stands in for the engine: it records the actions and refuses the dead letters
// named in conflict.
type recorder struct {
	mu       sync.Mutex
	calls    []string // "<mode or status> <dead letter> <key>"
	conflict map[string]bool
}

func (r *recorder) Replay(_ context.Context, q engine.ReplayRequest) (*engine.ReplayResult, error) {
	return r.record(q.Mode, q.DeadLetterID, q.IdempotencyKey)
}

func (r *recorder) Settle(_ context.Context, q engine.SettleRequest) (*engine.ReplayResult, error) {
	return r.record(q.Status, q.DeadLetterID, q.IdempotencyKey)
}

func (r *recorder) record(what, id, key string) (*engine.ReplayResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, what+" "+id+" "+key)
	if r.conflict[id] {
		return nil, &apperr.Error{Code: apperr.ECONFLICT, Message: "dlq.conflict.resolved"}
	}
	return &engine.ReplayResult{DeadLetterID: id, ExecutionID: models.NewID()}, nil
}

// queue counts what was queued; nothing runs by itself: the test calls Step.
type queue struct {
	mu  sync.Mutex
	ids []string
}

func (q *queue) EnqueueBulk(_ context.Context, id string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ids = append(q.ids, id)
	return nil
}

// seed writes an organization with n pending dead letters (and what they refer to).
func seed(t *testing.T, db *models.DB, n int) (string, []string) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	org := models.Organization{ID: models.NewID(), Name: "Biuro", CreatedAt: now}
	wf := models.Workflow{ID: models.NewID(), OrganizationID: org.ID, Name: "VAT", Version: 1, Definition: models.JSON(`{}`),
		UnknownErrors: "retry", WebhookToken: models.NewID(), WebhookSecret: "s", CreatedAt: now, UpdatedAt: now}
	tx := db.Conn(ctx)
	if err := tx.Create(&org).Error; err != nil {
		t.Fatal(err)
	}
	if err := tx.Create(&wf).Error; err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := 0; i < n; i++ {
		at := now.Add(-time.Duration(i) * time.Second)
		ex := models.Execution{ID: models.NewID(), OrganizationID: org.ID, WorkflowID: wf.ID, WorkflowVersion: 1, Status: models.ExecDLQPending,
			Input: models.JSON(`{}`), TriggerType: "api", CorrelationID: "c", CreatedAt: at, UpdatedAt: at}
		rec := models.ExecutionError{ID: models.NewID(), OrganizationID: org.ID, ExecutionID: ex.ID, StepID: "file", ErrorType: "validation",
			ErrorMessage: "NIP", Status: models.ErrDeadLetter, CreatedAt: at, UpdatedAt: at}
		dl := models.DeadLetter{ID: models.NewID(), OrganizationID: org.ID, ErrorID: rec.ID, WorkflowID: wf.ID, ExecutionID: ex.ID,
			OriginalInput: models.JSON(`{}`), StepStates: models.JSON(`[]`), FailedStepID: "file", Status: models.DLQPending,
			ErrorType: "validation", Reason: "NIP", ExpiresAt: at.Add(720 * time.Hour), CreatedAt: at, UpdatedAt: at}
		for _, row := range []any{&ex, &rec, &dl} {
			if err := tx.Create(row).Error; err != nil {
				t.Fatal(err)
			}
		}
		ids = append(ids, dl.ID)
	}
	return org.ID, ids
}

func TestBulkBatchesResultsAndCancel(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		org, ids := seed(t, db, 7)
		rec := &recorder{conflict: map[string]bool{ids[1]: true}}
		q := &queue{}
		svc := &bulk.Service{DB: db, Engine: rec, Queue: q, Rate: 3}
		actor := audit.Actor{Type: audit.ActorSystem}

		job, err := svc.Create(ctx, bulk.Request{OrganizationID: org, Action: bulk.Resolve, Filter: &models.DLQFilter{}, Notes: "n", Actor: actor})
		if err != nil {
			t.Fatal(err)
		}
		if job.Total != 7 || len(q.ids) != 1 || q.ids[0] != job.ID {
			t.Fatalf("job %+v queued %v", job, q.ids)
		}
		// A batch is at most Rate items, newest first; more remain.
		more, err := svc.Step(ctx, job.ID)
		if err != nil || !more || len(rec.calls) != 3 {
			t.Fatalf("first batch: more=%v err=%v calls=%v", more, err, rec.calls)
		}
		// (A batch's items are acted on several at once: the calls' order is not theirs.)
		if want := "resolved " + ids[0] + " bulk:" + job.ID; !slices.Contains(rec.calls, want) {
			t.Errorf("calls %q, want %q among them", rec.calls, want)
		}
		got, items, err := svc.Get(ctx, org, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != models.BulkRunning || got.Processed != 3 || got.Succeeded != 2 || got.Failed != 1 {
			t.Errorf("after a batch: %+v", got)
		}
		if items[1].Status != bulk.ItemFailed || items[1].Message == nil || *items[1].Message != "dlq.conflict.resolved" ||
			items[0].ExecutionID == nil || items[3].Status != bulk.ItemPending {
			t.Errorf("items %+v", items[:4])
		}
		// Another organization sees nothing; cancelling stops the rest.
		if err := svc.Cancel(ctx, models.NewID(), job.ID, actor); apperr.ErrorCode(err) != apperr.ENOTFOUND {
			t.Errorf("cancel from another organization: %v", err)
		}
		if err := svc.Cancel(ctx, org, job.ID, actor); err != nil {
			t.Fatal(err)
		}
		if more, err := svc.Step(ctx, job.ID); more || err != nil || len(rec.calls) != 3 {
			t.Errorf("a step after cancel acted: %v %v %d", more, err, len(rec.calls))
		}
		got, items, _ = svc.Get(ctx, org, job.ID)
		if got.Status != models.BulkCancelled || items[6].Status != bulk.ItemSkipped {
			t.Errorf("cancelled: %s, last item %s", got.Status, items[6].Status)
		}
		if err := svc.Cancel(ctx, org, job.ID, actor); apperr.ErrorCode(err) != apperr.ECONFLICT {
			t.Errorf("cancel twice: %v", err)
		}

		// By ids: a job runs to the end over several batches, and a repeat of a batch (a crash
		// before the results were stored) acts with the same idempotency key.
		job, err = svc.Create(ctx, bulk.Request{OrganizationID: org, Action: bulk.Retry, IDs: []string{ids[2], ids[3], ids[2]}, Actor: actor})
		if err != nil || job.Total != 2 {
			t.Fatalf("by ids: %+v %v", job, err)
		}
		for more := true; more; {
			if more, err = svc.Step(ctx, job.ID); err != nil {
				t.Fatal(err)
			}
		}
		got, _, _ = svc.Get(ctx, org, job.ID)
		if got.Status != models.BulkDone || got.Succeeded != 2 {
			t.Errorf("by ids: %+v", got)
		}
		if last := rec.calls[len(rec.calls)-1]; !strings.HasPrefix(last, engine.ReplayFromFailed+" ") || !strings.HasSuffix(last, "bulk:"+job.ID) {
			t.Errorf("retry call %q", last)
		}

		// Retry the whole workflow: each item's execution runs again as a new one (the retry a
		// rolled-back execution takes).
		job, err = svc.Create(ctx, bulk.Request{OrganizationID: org, Action: bulk.RetryFull, IDs: []string{ids[4]}, Actor: actor})
		if err != nil || job.Total != 1 {
			t.Fatalf("retry_full: %+v %v", job, err)
		}
		for more := true; more; {
			if more, err = svc.Step(ctx, job.ID); err != nil {
				t.Fatal(err)
			}
		}
		if last := rec.calls[len(rec.calls)-1]; last != engine.ReplayFull+" "+ids[4]+" bulk:"+job.ID {
			t.Errorf("retry_full call %q", last)
		}
	})
}
