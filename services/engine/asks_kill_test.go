package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/engine"
	"lifeline/services/workflows"
)

// keyLedger records the Idempotency-Key of every request it gets and answers 200.
type keyLedger struct {
	mu   sync.Mutex
	sent map[string]int
}

func (l *keyLedger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	l.sent[r.Header.Get("Idempotency-Key")]++
	l.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"filed": true}`)
}

// TestAskSurvivesKills: engine processes are killed with SIGKILL while ask steps park their
// executions, while the executions wait, and while the answered attempts move on (the
// answers are recorded by this process, which inserts the attempts' jobs; the children work
// them). Each execution makes exactly one request, is answered once and continues once: its
// filing step runs as attempt 1 with one idempotency key, and every execution ends SUCCEEDED.
func TestAskSurvivesKills(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts engine processes")
	}
	t.Parallel()
	for _, dialect := range modeltest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url, db := openDialect(t, dialect)
			clock := modeltest.Clock(t, db) // never moved
			ledger := &keyLedger{sent: map[string]int{}}
			srv := httptest.NewServer(ledger)
			t.Cleanup(srv.Close)
			eng, _, reg, err := newStack(db, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			org := models.Organization{ID: models.NewID(), Name: "Biuro Zatwierdzeń"}
			if err := db.Conn(ctx).Create(&org).Error; err != nil {
				t.Fatal(err)
			}
			partner := models.User{ID: models.NewID(), Email: "wspolnik@zatwierdzenia.example", Name: "Wspólnik", PasswordHash: "x", CreatedAt: time.Now().UTC()}
			if err := db.Conn(ctx).Create(&partner).Error; err != nil {
				t.Fatal(err)
			}
			if err := db.Conn(ctx).Create(&models.Membership{ID: models.NewID(), OrganizationID: org.ID, UserID: partner.ID, Role: models.RoleAdmin, CreatedAt: time.Now().UTC()}).Error; err != nil {
				t.Fatal(err)
			}
			// The ask step's own timeout (its lease) is short, so that an attempt a killed
			// process held while parking it is reclaimed within seconds.
			def := fmt.Sprintf(`{"name": "Zatwierdzanie", "settings": {"circuitBreaker": {"enabled": false}}, "steps": [
			  {"id": "approve", "type": "ask", "timeoutMs": 2000, "config": {"kind": "approval", "title": "Zatwierdź {{ input.order }}",
			   "assignees": ["role:admin"], "timeoutMs": 3600000}},
			  {"id": "file", "type": "http", "timeoutMs": 2000, "config": {"method": "POST", "url": "%s/file", "body": {"order": "{{ input.order }}"}}}]}`, srv.URL)
			wf, err := (&workflows.Service{DB: db, Steps: reg}).Create(ctx, org.ID, audit.System, []byte(def))
			if err != nil {
				t.Fatal(err)
			}
			count := func(q string, args ...any) int64 {
				var n int64
				if err := db.Conn(ctx).Raw(q, args...).Scan(&n).Error; err != nil {
					t.Fatal(err)
				}
				return n
			}
			status := func(s string) int64 {
				return count("SELECT COUNT(*) FROM workflow_executions WHERE organization_id = ? AND status = ?", org.ID, s)
			}
			waitFor := func(what string, bound time.Duration, done func() bool) {
				t.Helper()
				for deadline := time.Now().Add(bound); !done(); time.Sleep(20 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("%s: not after %s (waiting %d, succeeded %d)", what, bound, status(models.ExecWaiting), status(models.ExecSucceeded))
					}
				}
			}
			// The reconciler runs on River's leader: a killed leader would hold on for 15 s.
			handOver := func() {
				if err := db.Conn(ctx).Exec("DELETE FROM river_leader").Error; err != nil {
					t.Fatal(err)
				}
			}

			const n = 30
			ids := make([]string, n)
			for i := range n {
				ex, _, err := eng.Start(ctx, engine.StartRequest{OrganizationID: org.ID, WorkflowID: wf.ID,
					Input: fmt.Appendf(nil, `{"order": "ZAM/%04d"}`, i), Trigger: engine.TriggerAPI})
				if err != nil {
					t.Fatal(err)
				}
				ids[i] = ex.ID
			}

			// 1. Killed while parking: as soon as the first execution waits.
			c := startChild(t, url, "engine 1", clock)
			waitFor("a first request", 30*time.Second, func() bool { return status(models.ExecWaiting) > 0 })
			c.kill(t)
			parkedAtKill := status(models.ExecWaiting)
			handOver()

			// 2. Another process parks the rest (reclaiming what the first held); it is killed
			// while they all wait.
			c = startChild(t, url, "engine 2", clock)
			waitFor("every execution waiting", time.Minute, func() bool { return status(models.ExecWaiting) == n })
			c.kill(t)
			handOver()

			// 3. The answers are recorded with no engine process alive; a process starts and is
			// killed while the answered attempts move on; a last one finishes.
			open, err := eng.Asks().List(ctx, org.ID, models.InterventionFilter{Status: models.InterventionOpen, Limit: 100})
			if err != nil || len(open) != n {
				t.Fatalf("%d open requests (%v), want %d", len(open), err, n)
			}
			for _, iv := range open {
				if _, err := eng.Asks().Answer(ctx, engine.AnswerRequest{OrganizationID: org.ID, ID: iv.ID, Actor: audit.Actor{Type: audit.ActorUser, ID: partner.ID},
					ActorName: partner.Email, Role: models.RoleAdmin, Answer: "approved"}); err != nil {
					t.Fatal(err)
				}
			}
			c = startChild(t, url, "engine 3", clock)
			waitFor("a first filing", 30*time.Second, func() bool { return status(models.ExecSucceeded) > 0 })
			c.kill(t)
			handOver()
			startChild(t, url, "engine 4", clock)
			waitFor("every execution SUCCEEDED", 2*time.Minute, func() bool { return status(models.ExecSucceeded) == n })
			t.Logf("%d of %d waited when the first process was killed", parkedAtKill, n)

			// One request per execution, answered; one filing attempt, its key sent (once, or
			// again after a kill: never another key).
			if got := count("SELECT COUNT(*) FROM interventions WHERE organization_id = ? AND status = ?", org.ID, models.InterventionAnswered); got != n {
				t.Errorf("%d answered requests, want %d", got, n)
			}
			if got := count("SELECT COUNT(*) FROM interventions WHERE organization_id = ?", org.ID); got != n {
				t.Errorf("%d requests, want one per execution (%d)", got, n)
			}
			for _, step := range []string{"approve", "file"} {
				if got := count("SELECT COUNT(*) FROM step_executions WHERE organization_id = ? AND step_id = ?", org.ID, step); got != n {
					t.Errorf("%d attempts of %s, want one per execution (%d)", got, step, n)
				}
			}
			ledger.mu.Lock()
			defer ledger.mu.Unlock()
			for _, id := range ids {
				if ledger.sent[engine.IdempotencyKey(id, "file", 1)] == 0 {
					t.Errorf("%s: its filing was never sent", id)
				}
			}
			if len(ledger.sent) != n {
				t.Errorf("%d idempotency keys reached the ledger, want %d", len(ledger.sent), n)
			}
		})
	}
}
