package bulk_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/breaker"
	"lifeline/services/bulk"
)

// clock is a test clock moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// The organization's rate sets a batch's size; a batch that starts late is larger by the
// time it lost (up to a second's worth), so the job keeps its rate; the job asks to run
// again a second after its batch began.
func TestBulkRateIsTheOrganizations(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		org, _ := seed(t, db, 20)
		if err := models.SetBulkRate(db.Conn(ctx), org, 4); err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		clk := &clock{t: time.Now().UTC()}
		svc := &bulk.Service{DB: db, Engine: rec, Queue: &queue{}, Now: clk.Now}
		job, err := svc.Create(ctx, bulk.Request{OrganizationID: org, Action: bulk.Resolve, Filter: &models.DLQFilter{}, Notes: "n",
			Actor: audit.Actor{Type: audit.ActorSystem}})
		if err != nil {
			t.Fatal(err)
		}
		o, err := svc.Run(ctx, job.ID)
		if err != nil || !o.More || rec.count() != 4 || o.Wait != time.Second {
			t.Fatalf("first batch: %+v %v, %d calls", o, err, rec.count())
		}
		clk.add(1500 * time.Millisecond) // the queue ran it half a second late
		if o, err = svc.Run(ctx, job.ID); err != nil || !o.More || rec.count() != 4+6 {
			t.Fatalf("late batch: %+v %v, %d calls, want 10", o, err, rec.count())
		}
		clk.add(5 * time.Second) // a long delay makes up at most a second's worth
		if o, err = svc.Run(ctx, job.ID); err != nil || rec.count() != 10+8 {
			t.Fatalf("very late batch: %+v %v, %d calls, want 18", o, err, rec.count())
		}
		clk.add(time.Second)
		if o, err = svc.Run(ctx, job.ID); err != nil || o.More || rec.count() != 20 {
			t.Fatalf("last batch: %+v %v, %d calls", o, err, rec.count())
		}
		if sum, err := svc.Summary(ctx, org, job.ID); err != nil || sum.Job.Status != models.BulkDone || sum.Counts[bulk.ItemDone] != 20 {
			t.Fatalf("summary %+v %v", sum, err)
		}
	})
}

// breakerRow writes a breaker of the organization in state, opened at openedAt.
func breakerRow(t *testing.T, db *models.DB, org, key, state string, openedAt time.Time) *models.CircuitBreaker {
	t.Helper()
	b := &models.CircuitBreaker{ID: models.NewID(), OrganizationID: org, ScopeKey: key, State: state, FailureThreshold: 5,
		ResetTimeoutMs: 30_000, HalfOpenRequests: 2, OpenedAt: &openedAt, CreatedAt: openedAt, UpdatedAt: openedAt}
	if err := db.Conn(context.Background()).Create(b).Error; err != nil {
		t.Fatal(err)
	}
	return b
}

// A forcing test of the breaker-aware pause: while the failed step's breaker is open, a
// retry job calls nothing (nothing goes back to the DLQ) and its items wait; once the reset
// timeout passes a batch sends only the half-open trial allowance; once the breaker closes,
// the rest run. An item whose dead letter names another breaker (a host's) follows that one.
func TestBulkWaitsBehindOpenBreaker(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		org, ids := seed(t, db, 7)
		var dl models.DeadLetter
		if err := db.Conn(ctx).First(&dl, "id = ?", ids[0]).Error; err != nil {
			t.Fatal(err)
		}
		clk := &clock{t: time.Now().UTC().Truncate(time.Second)}
		step := breakerRow(t, db, org, "step:"+dl.WorkflowID+":file", breaker.Open, clk.Now())
		host := breakerRow(t, db, org, "host:bank.example", breaker.Closed, clk.Now())
		// The last item failed behind the bank's host breaker (its step states say so).
		if err := db.Conn(ctx).Model(&models.DeadLetter{}).Where("id = ?", ids[6]).
			Update("step_states", models.JSON(`[{"stepId": "file", "status": "failed", "breaker": {"id": "`+host.ID+`", "state": "closed"}}]`)).Error; err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		svc := &bulk.Service{DB: db, Engine: rec, Queue: &queue{}, Now: clk.Now, Rate: 100}
		job, err := svc.Create(ctx, bulk.Request{OrganizationID: org, Action: bulk.Retry, IDs: ids, Actor: audit.Actor{Type: audit.ActorSystem}})
		if err != nil {
			t.Fatal(err)
		}
		o, err := svc.Run(ctx, job.ID)
		if err != nil || !o.More || rec.count() != 1 || !strings.Contains(rec.calls[0], ids[6]) {
			t.Fatalf("open breaker: %+v %v, calls %v (only the host's item may run)", o, err, rec.calls)
		}
		sum, _ := svc.Summary(ctx, org, job.ID)
		if sum.Counts[bulk.ItemWaiting] != 6 || sum.Counts[bulk.ItemDone] != 1 || sum.Job.Status != models.BulkRunning {
			t.Fatalf("counts %v, status %s", sum.Counts, sum.Job.Status)
		}
		// Waiting, the job runs again when the breaker may half-open, not before.
		if o, err = svc.Run(ctx, job.ID); err != nil || !o.More || o.Wait != 30*time.Second || rec.count() != 1 {
			t.Fatalf("still open: %+v %v, %d calls", o, err, rec.count())
		}
		clk.add(31 * time.Second)
		if o, err = svc.Run(ctx, job.ID); err != nil || !o.More || rec.count() != 1+2 {
			t.Fatalf("due to half-open: %+v %v, %d calls, want the 2 trials", o, err, rec.count())
		}
		sum, _ = svc.Summary(ctx, org, job.ID)
		if sum.Counts[bulk.ItemWaiting] != 0 || sum.Counts[bulk.ItemPending] != 4 {
			t.Fatalf("after the trials: %v", sum.Counts)
		}
		// Closed: the rest run in one batch.
		if err := db.Conn(ctx).Model(step).Updates(map[string]any{"state": breaker.Closed}).Error; err != nil {
			t.Fatal(err)
		}
		clk.add(time.Second)
		if o, err = svc.Run(ctx, job.ID); err != nil || o.More || rec.count() != 7 {
			t.Fatalf("closed: %+v %v, %d calls", o, err, rec.count())
		}
		sum, _ = svc.Summary(ctx, org, job.ID)
		if sum.Job.Status != models.BulkDone || sum.Counts[bulk.ItemDone] != 7 {
			t.Fatalf("done: %v %s", sum.Counts, sum.Job.Status)
		}
		// Resolve and skip call no target: no breaker holds them.
		if err := db.Conn(ctx).Model(step).Updates(map[string]any{"state": breaker.Open, "opened_at": clk.Now()}).Error; err != nil {
			t.Fatal(err)
		}
		job, err = svc.Create(ctx, bulk.Request{OrganizationID: org, Action: bulk.Resolve, IDs: ids[:2], Notes: "n", Actor: audit.Actor{Type: audit.ActorSystem}})
		if err != nil {
			t.Fatal(err)
		}
		if o, err = svc.Run(ctx, job.ID); err != nil || o.More || rec.count() != 9 {
			t.Fatalf("resolve behind an open breaker: %+v %v, %d calls", o, err, rec.count())
		}
	})
}

// WaitItems and WakeItems are guarded: each moves an item only from its own state, and says
// how many moved (0: lost).
func TestBulkWaitWakeTransitions(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		org, ids := seed(t, db, 3)
		svc := &bulk.Service{DB: db, Engine: &recorder{}, Queue: &queue{}, Rate: 1}
		job, err := svc.Create(ctx, bulk.Request{OrganizationID: org, Action: bulk.Retry, IDs: ids, Actor: audit.Actor{Type: audit.ActorSystem}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Step(ctx, job.ID); err != nil { // the first item is done
			t.Fatal(err)
		}
		var dl models.DeadLetter
		db.Conn(ctx).First(&dl, "id = ?", ids[0])
		key := "step:" + dl.WorkflowID + ":file"
		now := time.Now().UTC()
		if n, err := bulk.WaitItems(db.Conn(ctx), job.ID, []string{key}, now); err != nil || n != 2 {
			t.Fatalf("wait: %d %v, want the 2 pending", n, err)
		}
		if n, err := bulk.WaitItems(db.Conn(ctx), job.ID, []string{key}, now); err != nil || n != 0 {
			t.Fatalf("wait again: %d %v, want lost", n, err)
		}
		if n, err := bulk.WakeItems(db.Conn(ctx), job.ID, []string{key}, now); err != nil || n != 0 {
			t.Fatalf("wake while blocked: %d %v", n, err)
		}
		if n, err := bulk.WakeItems(db.Conn(ctx), job.ID, nil, now); err != nil || n != 2 {
			t.Fatalf("wake: %d %v", n, err)
		}
		if n, err := bulk.WakeItems(db.Conn(ctx), job.ID, nil, now); err != nil || n != 0 {
			t.Fatalf("wake again: %d %v, want lost", n, err)
		}
		page, err := svc.Items(ctx, org, job.ID, bulk.ItemQuery{After: -1, Limit: 10, Status: bulk.ItemDone})
		if err != nil || len(page.Items) != 1 || page.Items[0].DeadLetterID != ids[0] || page.Next != -1 {
			t.Fatalf("done items: %+v %v", page, err)
		}
		if _, err := svc.Items(ctx, models.NewID(), job.ID, bulk.ItemQuery{After: -1, Limit: 10}); err == nil {
			t.Fatal("another organization's job paged")
		}
	})
}
