package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/engine"
	"lifeline/services/jobs"
	"lifeline/services/outbound"
	"lifeline/services/steps"
	"lifeline/services/workflows"
)

// lockedBuffer is a log destination safe for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// slowLedger answers every request after 100 ms and counts the requests per Idempotency-Key.
type slowLedger struct {
	mu   sync.Mutex
	seen map[string]int
	n    int
}

func (l *slowLedger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	l.mu.Lock()
	l.seen[key]++
	l.n++
	l.mu.Unlock()
	time.Sleep(100 * time.Millisecond)
	fmt.Fprint(w, `{"ok": true}`)
}

func (l *slowLedger) requests() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// outageDurations: 5 s in `make test`; 60 s too with LIFELINE_OUTAGE_LONG=1 (`make chaos`).
func outageDurations() []time.Duration {
	d := []time.Duration{5 * time.Second}
	if os.Getenv("LIFELINE_OUTAGE_LONG") == "1" {
		d = append(d, 60*time.Second)
	}
	return d
}

// TestDatabaseOutagePostgres stops the PostgreSQL server in the middle of 100 executions of
// 3 steps, starts it again, and checks that every execution succeeded within 10 s of its
// return, each step with one idempotency key (an attempt in flight may be sent twice).
func TestDatabaseOutagePostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("an outage of several seconds")
	}
	for _, d := range outageDurations() {
		t.Run(d.String(), func(t *testing.T) {
			c := modeltest.OwnPostgres(t)
			db, err := models.Open(context.Background(), c.URL())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			testOutage(t, db, d, c.Stop, c.Start)
		})
	}
}

// TestDatabaseOutageSQLite holds SQLite's write lock from another connection for the outage
// (the file stays readable, as in WAL mode), with the same checks.
func TestDatabaseOutageSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("an outage of several seconds")
	}
	for _, d := range outageDurations() {
		t.Run(d.String(), func(t *testing.T) {
			url := modeltest.URL(t, models.SQLite)
			db, err := models.Open(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			locker, err := models.Open(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = locker.Close() })
			ctx := context.Background()
			conn, err := locker.SQL.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			lock := func() {
				if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
					t.Fatal(err)
				}
			}
			unlock := func() {
				if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
					t.Fatal(err)
				}
			}
			testOutage(t, db, d, lock, unlock)
		})
	}
}

func testOutage(t *testing.T, db *models.DB, outage time.Duration, down, up func()) {
	ctx := context.Background()
	svc := &slowLedger{seen: map[string]int{}}
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)

	// The engine and queue as `lifeline serve` configures them: leases, reconciler and
	// grace periods at their defaults, so none of them hides a slow recovery.
	reg := steps.Builtins(outbound.NewClient(outbound.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}))
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	eng, runner, err := wire(db, log, reg, engine.Config{}, jobs.Config{})
	if err != nil {
		t.Fatal(err)
	}
	org := models.Organization{ID: models.NewID(), Name: "Biuro Testowe"}
	if err := db.Conn(ctx).Create(&org).Error; err != nil {
		t.Fatal(err)
	}
	step := `{"id": "%s", "type": "http", "config": {"method": "POST", "url": %q, "body": {"n": "{{ input.n }}"}}}`
	def := fmt.Sprintf(`{"name": "Outage", "steps": [%s, %s, %s]}`,
		fmt.Sprintf(step, "import", srv.URL), fmt.Sprintf(step, "match", srv.URL), fmt.Sprintf(step, "post", srv.URL))
	wf, err := (&workflows.Service{DB: db, Steps: reg}).Create(ctx, org.ID, audit.System, []byte(def))
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	ids := make([]string, n)
	for i := range ids {
		ex, _, err := eng.Start(ctx, engine.StartRequest{OrganizationID: org.ID, WorkflowID: wf.ID, Input: fmt.Appendf(nil, `{"n": %d}`, i)})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = ex.ID
	}
	if err := runner.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = runner.Stop(ctx)
	})

	// In the middle: about a third of the steps sent.
	deadline := time.Now().Add(time.Minute)
	for svc.requests() < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d requests after a minute", svc.requests())
		}
		time.Sleep(10 * time.Millisecond)
	}
	mark := len(logs.String())
	down()
	time.Sleep(outage / 2)
	if db.Dialect == models.Postgres || outage > 10*time.Second {
		// /readyz answers with Health.Ready: not ready while the database is away.
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := eng.Health().Ready(rctx); err == nil {
			t.Error("ready while the database is unreachable")
		}
		cancel()
	}
	time.Sleep(outage - outage/2)
	up()
	back := time.Now()
	limit := 10 * time.Second // ready again, and every execution done, within it
	if raceDetector {
		limit = 30 * time.Second
	}
	for eng.Health().Ready(ctx) != nil {
		if time.Since(back) > limit {
			t.Fatalf("not ready %s after the database came back", limit)
		}
		time.Sleep(50 * time.Millisecond)
	}

	var done int64
	for {
		err := db.Conn(ctx).Model(&models.Execution{}).Where("id IN ? AND status = ?", ids, models.ExecSucceeded).Count(&done).Error
		if err == nil && done == n {
			break
		}
		if time.Since(back) > time.Minute {
			t.Fatalf("%d of %d executions succeeded a minute after the database came back (last error: %v)", done, n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(back)
	// The log says once that the database went away and once that it came back. (SQLite
	// writers wait for a lock up to busy_timeout, 10 s: a shorter lock is no outage.)
	text := logs.String()[mark:]
	gone, back2 := strings.Count(text, "the database is unreachable"), strings.Count(text, "the database is reachable again")
	if gone != back2 || gone > 1 || (gone == 0 && (db.Dialect == models.Postgres || outage > 10*time.Second)) {
		t.Errorf("the log says %d times that the database is unreachable and %d times that it is back; want once each:\n%s", gone, back2, text)
	}
	if lines := strings.Count(text, "\n"); lines > 40 {
		t.Errorf("%d log lines for one outage; want a few:\n%s", lines, text)
	}
	if took > limit {
		t.Errorf("the last execution succeeded %s after the database came back; want within %s", took.Round(time.Millisecond), limit)
	} else {
		t.Logf("all %d executions succeeded %s after a %s outage ended", n, took.Round(time.Millisecond), outage)
	}

	// One idempotency key per step, attempt 1 (the service never fails); sent at most twice.
	svc.mu.Lock()
	defer svc.mu.Unlock()
	twice := 0
	for _, id := range ids {
		for _, s := range []string{"import", "match", "post"} {
			key := engine.IdempotencyKey(id, s, 1)
			switch svc.seen[key] {
			case 1:
			case 2:
				twice++
			default:
				t.Errorf("%s was sent %d times", key, svc.seen[key])
			}
		}
	}
	if len(svc.seen) != n*3 {
		t.Errorf("the service saw %d idempotency keys; want %d (one per step)", len(svc.seen), n*3)
	}
	t.Logf("%d steps were sent twice (in flight when the database went away)", twice)
}
