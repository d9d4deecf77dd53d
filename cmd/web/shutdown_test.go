package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/engine"
	"lifeline/services/jobs"
	"lifeline/services/outbound"
	"lifeline/services/secrets"
	"lifeline/services/steps"
	"lifeline/services/workflows"
)

const serveChildEnv = "LIFELINE_SERVE_CHILD"

// TestServeChild is not a test: it is the `lifeline serve` process of TestGracefulShutdown,
// with main's signal handling.
func TestServeChild(t *testing.T) {
	if os.Getenv(serveChildEnv) != "1" {
		t.Skip("helper process of TestGracefulShutdown")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, []string{"serve"}, os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "lifeline:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// slowService answers every call after delay, and reports the first call's arrival.
type slowService struct {
	delay   time.Duration
	mu      sync.Mutex
	calls   int
	arrived chan struct{}
}

func (s *slowService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.calls++
	if s.calls == 1 {
		close(s.arrived)
	}
	s.mu.Unlock()
	select {
	case <-time.After(s.delay):
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"posted": true}`)
}

func (s *slowService) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// TestGracefulShutdown: SIGTERM in the middle of a step lets it finish and commit, once;
// a step that outlasts LIFELINE_SHUTDOWN_TIMEOUT is handed back; either way the process
// exits within the timeout.
func TestGracefulShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	t.Parallel()
	cases := []struct {
		name      string
		stepTime  time.Duration
		timeout   time.Duration
		succeeded bool
	}{
		{"step finishes", 2 * time.Second, 10 * time.Second, true},
		{"step outlasts the timeout", 30 * time.Second, 3 * time.Second, false},
	}
	for _, dialect := range modeltest.Dialects {
		for _, tc := range cases {
			t.Run(dialect+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				url := modeltest.URL(t, dialect)
				svc := &slowService{delay: tc.stepTime, arrived: make(chan struct{})}
				srv := httptest.NewServer(svc)
				defer srv.Close()
				db, execID := prepareExecution(t, url, fmt.Sprintf(`{"name": "Księgowanie", "steps": [
				  {"id": "post", "type": "http", "timeoutMs": 60000, "config": {"method": "POST", "url": %q, "body": {}}}]}`, srv.URL))

				cmd := exec.Command(os.Args[0], "-test.run=^TestServeChild$", "-test.timeout=5m")
				cmd.Env = append(os.Environ(), serveChildEnv+"=1", "DATABASE_URL="+url, "LIFELINE_ADDR=127.0.0.1:0",
					"LIFELINE_OUTBOUND_ALLOW=127.0.0.0/8", "LIFELINE_SHUTDOWN_TIMEOUT="+tc.timeout.String(), "LIFELINE_DEMO=false", "LIFELINE_ENCRYPTION_KEYS="+testKeys(t))
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				defer func() {
					_ = cmd.Process.Kill()
					if t.Failed() {
						t.Logf("process output:\n%s", out.String())
					}
				}()

				select {
				case <-svc.arrived:
				case err := <-done:
					t.Fatalf("process exited before the step ran: %v", err)
				case <-time.After(60 * time.Second):
					t.Fatal("the step never ran")
				}
				time.Sleep(200 * time.Millisecond) // well inside the step
				sent := time.Now()
				if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("exit: %v", err)
					}
				case <-time.After(tc.timeout + 10*time.Second):
					t.Fatalf("still running %s after SIGTERM", tc.timeout+10*time.Second)
				}
				// The timeout covers the whole stop; allow for a loaded machine (the steps take
				// far longer than this).
				if took := time.Since(sent); took > tc.timeout+3*time.Second {
					t.Fatalf("exited %s after SIGTERM, want within %s", took, tc.timeout)
				}

				ctx := context.Background()
				var as []models.StepAttempt
				if err := db.Conn(ctx).Where("execution_id = ?", execID).Order("attempt").Find(&as).Error; err != nil {
					t.Fatal(err)
				}
				var ex models.Execution
				if err := db.Conn(ctx).First(&ex, "id = ?", execID).Error; err != nil {
					t.Fatal(err)
				}
				if svc.Calls() != 1 {
					t.Fatalf("%d calls, want exactly 1", svc.Calls())
				}
				if tc.succeeded {
					if len(as) != 1 || as[0].Status != models.StepSucceeded || ex.Status != models.ExecSucceeded {
						t.Fatalf("attempts %+v, execution %s: the step in flight must finish and commit", as, ex.Status)
					}
					return
				}
				// Handed back: PENDING at the next generation, same attempt number and key.
				if len(as) != 1 || as[0].Status != models.StepPending || as[0].Generation != 2 || as[0].Attempt != 1 {
					t.Fatalf("attempts %+v: the step still running at the timeout must be handed back", as)
				}
			})
		}
	}
}

// prepareExecution creates an organization, a workflow and an execution whose first
// attempt is queued (no worker runs it in this process).
func prepareExecution(t *testing.T, url, def string) (*models.DB, string) {
	t.Helper()
	ctx := context.Background()
	db, err := models.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	reg := steps.Builtins(outbound.NewClient(outbound.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	queue, err := jobs.NewQueue(db, jobs.Config{}, log) // inserts jobs only: nothing works them here
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(db, reg, log, engine.Config{Queue: queue})
	org := models.Organization{ID: models.NewID(), Name: "Biuro Rachunkowe"}
	if err := db.Conn(ctx).Create(&org).Error; err != nil {
		t.Fatal(err)
	}
	wf, err := (&workflows.Service{DB: db, Steps: reg}).Create(ctx, org.ID, audit.System, []byte(def))
	if err != nil {
		t.Fatal(err)
	}
	ex, _, err := eng.Start(ctx, engine.StartRequest{OrganizationID: org.ID, WorkflowID: wf.ID, Input: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	return db, ex.ID
}

// testKeys is a fresh key ring spec, so no key file is written next to the tests.
func testKeys(t *testing.T) string {
	t.Helper()
	spec, err := secrets.NewKeySpec("test")
	if err != nil {
		t.Fatal(err)
	}
	return spec
}
