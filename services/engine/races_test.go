package engine_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/engine"
)

// barrier holds each of n callers until all n have arrived (per key).
type barrier struct {
	n    int
	mu   sync.Mutex
	wait map[string]*sync.WaitGroup
}

func newBarrier(n int) *barrier { return &barrier{n: n, wait: map[string]*sync.WaitGroup{}} }

func (b *barrier) arrive(key string) {
	b.mu.Lock()
	wg, ok := b.wait[key]
	if !ok {
		wg = &sync.WaitGroup{}
		wg.Add(b.n)
		b.wait[key] = wg
	}
	b.mu.Unlock()
	wg.Done()
	wg.Wait()
}

// TestReplayAndRollbackTogether: a replay and a rollback started at the same moment on one
// dead-lettered execution, both past their checks before either writes (a hook holds each
// until the other has arrived): exactly one starts, the other is a conflict, and the
// execution is either replaying or rolling back, never both. 50 rounds, both databases.
func TestReplayAndRollbackTogether(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		h := newHarness(t, db)
		// Once the rounds begin, a replayed step is held until the test ends: a replay that
		// won stays in flight (it cannot fail back to the DLQ before the rollback asks).
		var holding atomic.Bool
		hold := make(chan struct{})
		svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/file" {
				if holding.Load() {
					<-hold
				}
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprint(w, `{"error": "NIP must have 10 digits"}`)
				return
			}
			fmt.Fprint(w, `{"id": "B-7"}`)
		}))
		defer svc.Close()
		defer close(hold)
		wf := h.workflow(fmt.Sprintf(`{"name": "Księgowanie", "settings": {"retryPolicy": {"maxRetries": 0}}, "steps": [
		  {"id": "book", "type": "http", "config": {"method": "POST", "url": "%[1]s/book"},
		   "compensation": {"compensationType": "api_call", "config": {"method": "DELETE", "url": "%[1]s/cancel"}}},
		  {"id": "file", "type": "http", "config": {"method": "POST", "url": "%[1]s/file"}}]}`, svc.URL))
		const rounds = 50
		var execs []*models.Execution
		for range rounds {
			execs = append(execs, h.start(wf, `{"nip": "1"}`))
		}
		dls := make([]*models.DeadLetter, rounds)
		for i, ex := range execs {
			if got := h.wait(ex.ID, 30*time.Second); got.Status != models.ExecDLQPending {
				t.Fatalf("execution %d: %s", i, got.Status)
			}
			dls[i] = h.onlyDeadLetter(ex.ID)
		}
		holding.Store(true)
		b := newBarrier(2)
		h.eng.SetHooks(engine.Hooks{BeforeTx: func(transition, executionID string) {
			if transition == engine.TransitionStartReplay || transition == engine.TransitionStartRollback {
				b.arrive(executionID)
			}
		}})
		actor := h.user()
		replays := 0
		for i, ex := range execs {
			var wg sync.WaitGroup
			var replayErr, rollbackErr error
			wg.Add(2)
			go func() {
				defer wg.Done()
				_, replayErr = h.eng.Replay(context.Background(), engine.ReplayRequest{OrganizationID: h.org, DeadLetterID: dls[i].ID,
					Mode: engine.ReplayFromFailed, Actor: actor})
			}()
			go func() {
				defer wg.Done()
				_, rollbackErr = h.eng.StartRollback(context.Background(), engine.RollbackRequest{OrganizationID: h.org, ExecutionID: ex.ID, Actor: audit.System})
			}()
			wg.Wait()
			if (replayErr == nil) == (rollbackErr == nil) {
				t.Fatalf("round %d: replay %v, rollback %v: exactly one must start", i, replayErr, rollbackErr)
			}
			lost := replayErr
			if replayErr == nil {
				replays++
				lost = rollbackErr
			}
			var me *apperr.Error
			if !errors.As(lost, &me) || me.Code != apperr.ECONFLICT {
				t.Fatalf("round %d: the loser got %v, want a conflict", i, lost)
			}
		}
		h.eng.SetHooks(engine.Hooks{})
		// What each execution went through: a replay (attempts after the dead letter) or a
		// rollback (compensations), never both.
		for i, ex := range execs {
			comps := h.compensations(ex.ID)
			var reran int
			for _, a := range h.attempts(ex.ID) {
				if a.StepID == "file" && a.Attempt > 1 {
					reran++
				}
			}
			if (len(comps) > 0) == (reran > 0) {
				t.Errorf("round %d: %d compensations and %d replayed attempts", i, len(comps), reran)
			}
		}
		t.Logf("%d replays won, %d rollbacks won", replays, rounds-replays)
	})
}

// TestEnqueueAfterCommitOutlivesTheRequest: on PostgreSQL the jobs a state change needs are
// queued right after its commit. A request whose client goes away at that moment (its
// context ends) still gets its job queued, instead of leaving the work to the reconciler.
func TestEnqueueAfterCommitOutlivesTheRequest(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		h := newHarness(t, db)
		svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error": "NIP must have 10 digits"}`)
		}))
		defer svc.Close()
		wf := h.workflow(fmt.Sprintf(`{"name": "VAT", "settings": {"retryPolicy": {"maxRetries": 0}},
		  "steps": [{"id": "file", "type": "http", "config": {"method": "POST", "url": %q}}]}`, svc.URL))
		ex, dl := h.deadLettered(wf, `{"nip": "1"}`)
		// Nothing works the queue now (the job must be found there), and nothing else
		// commits while the hook is set.
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := h.runner.Stop(sctx); err != nil {
			t.Fatal(err)
		}
		scancel()
		ctx, cancel := context.WithCancel(context.Background())
		h.eng.SetHooks(engine.Hooks{AfterTx: cancel})
		if _, err := h.eng.Replay(ctx, engine.ReplayRequest{OrganizationID: h.org, DeadLetterID: dl.ID, Mode: engine.ReplayFromFailed, Actor: h.user()}); err != nil {
			t.Fatal(err)
		}
		h.eng.SetHooks(engine.Hooks{})
		var replay models.StepAttempt
		if err := db.Conn(context.Background()).Where("execution_id = ? AND attempt = 2", ex.ID).First(&replay).Error; err != nil {
			t.Fatal(err)
		}
		var jobs int64
		q := "SELECT count(*) FROM river_job WHERE kind = 'run_attempt' AND args->>'attempt_id' = ?"
		if db.Dialect == models.SQLite {
			q = "SELECT count(*) FROM river_job WHERE kind = 'run_attempt' AND json_extract(args, '$.attempt_id') = ?"
		}
		if err := db.Conn(context.Background()).Raw(q, replay.ID).Scan(&jobs).Error; err != nil || jobs != 1 {
			t.Fatalf("the replay's job: %d queued (%v)", jobs, err)
		}
	})
}
