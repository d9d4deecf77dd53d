package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/classify"
	"lifeline/services/dbconn"
	"lifeline/services/engine"
)

// TestRollbackDatabaseOperationAndSSRF: a database_operation compensation binds a step's
// output as a parameter (an injection attempt in it is stored as text, nothing else runs),
// and an api_call compensation aimed at a cloud metadata address is refused, not retried.
func TestRollbackDatabaseOperationAndSSRF(t *testing.T) {
	if os.Getenv("TEST_DATABASE_URL") == "" {
		t.Skip("needs a PostgreSQL to stand for the office's ERP database (make test starts one)")
	}
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		// The ERP: a PostgreSQL database of its own with a clients table, reached as a role
		// that is not a superuser, on another port than Lifeline's own database server
		// (which connections never reach).
		office := modeltest.OfficeDatabase(t)
		conns := dbconn.New(db, dbconn.Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Own: []string{office.Server}})
		h := newHarnessConfig(t, db, harnessSteps(), engine.Config{Databases: conns})
		erp := office.Conn
		if _, err := erp.Exec(ctx, `CREATE TABLE clients (id int PRIMARY KEY, note text); INSERT INTO clients VALUES (1, 'booked')`); err != nil {
			t.Fatal(err)
		}
		if _, err := conns.Create(ctx, h.org, audit.System, dbconn.Input{Name: "erp", Driver: "postgres", DSN: office.DSN}); err != nil {
			t.Fatal(err)
		}
		svc := &bookings{}
		srv := httptest.NewServer(svc)
		defer srv.Close()
		injection := `x'); DROP TABLE clients; --`
		wf := h.workflow(fmt.Sprintf(`{"name": "ERP %d", "settings": {"retryPolicy": {"maxRetries": 0}, "rollbackOnFailure": true},
		  "steps": [
		    {"id": "book", "type": "transform", "config": {"output": {"id": 1, "note": "{{ input.note }}"}},
		     "compensation": {"compensationType": "database_operation",
		       "config": {"connection": "erp", "sqlTemplate": "UPDATE clients SET note = $1 WHERE id = $2", "params": ["{{ step.output.note }}", "{{ step.output.id }}"]}}},
		    {"id": "notify", "type": "transform", "config": {"output": 1},
		     "compensation": {"compensationType": "api_call", "config": {"method": "POST", "url": "http://169.254.169.254/latest/meta-data/"}}},
		    {"id": "file", "type": "http", "config": {"method": "POST", "url": "%s/fail"}}]}`, time.Now().UnixNano(), srv.URL))
		ex := h.start(wf, fmt.Sprintf(`{"note": %q}`, injection))
		done := h.waitRollback(ex.ID)
		cs := h.compensations(ex.ID)
		if *done.RollbackStatus != models.RollbackFailed || len(cs) != 2 {
			t.Fatalf("rollback %s with %d compensations", *done.RollbackStatus, len(cs))
		}
		// notify's call to the metadata address: refused once, not retried; the rollback went on.
		if cs[0].StepID != "notify" || *cs[0].Status != models.CompFailed || cs[0].Attempts != 1 || cs[0].ErrorMessage == nil {
			t.Errorf("SSRF compensation %+v", cs[0])
		}
		if cs[1].StepID != "book" || *cs[1].Status != models.CompCompleted || !strings.Contains(string(cs[1].Result), `"rowsAffected": 1`) &&
			!strings.Contains(string(cs[1].Result), `"rowsAffected":1`) {
			t.Fatalf("database compensation %+v (%s)", cs[1], cs[1].Result)
		}
		var note string
		if err := erp.QueryRow(ctx, `SELECT note FROM clients WHERE id = 1`).Scan(&note); err != nil || note != injection {
			t.Fatalf("clients after the compensation: %q %v (the table must still be there, the text stored as it was)", note, err)
		}
	})
}

// lostAnswer is a DatabaseExecutor whose first lose answers are lost after the statement
// committed: the engine hears a broken connection (transient), as after a crash between the
// target database's commit and the compensation's record, and runs the compensation again.
type lostAnswer struct {
	engine.DatabaseExecutor
	mu   sync.Mutex
	lose int
	runs []dbconn.Result
}

func (l *lostAnswer) Exec(ctx context.Context, orgID string, st dbconn.Statement) (dbconn.Result, error) {
	r, err := l.DatabaseExecutor.Exec(ctx, orgID, st)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs = append(l.runs, r)
	if err == nil && l.lose > 0 {
		l.lose--
		return dbconn.Result{}, &dbconn.Error{Type: classify.Transient, Code: "CONNECTION", Message: "the connection to the database server erp:5432 failed"}
	}
	return r, err
}

// TestRollbackDatabaseOperationOnce: a database_operation compensation whose first run
// committed in the office's database but whose answer was lost is retried by the engine
// with the same compensation key, and the retry finds the key: the debit is undone once
// (not twice), and the compensation's result says it was a replay. Run again at a later
// generation (as after a lease that ran out), it still changes nothing.
func TestRollbackDatabaseOperationOnce(t *testing.T) {
	if os.Getenv("TEST_DATABASE_URL") == "" {
		t.Skip("needs a PostgreSQL to stand for the office's ERP database (make test starts one)")
	}
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		office := modeltest.OfficeDatabase(t)
		conns := dbconn.New(db, dbconn.Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Own: []string{office.Server}})
		lost := &lostAnswer{DatabaseExecutor: conns, lose: 1}
		h := newHarnessConfig(t, db, harnessSteps(), engine.Config{Databases: lost})
		if _, err := office.Conn.Exec(ctx, `CREATE TABLE accounts (id int PRIMARY KEY, balance numeric(12,2) NOT NULL); INSERT INTO accounts VALUES (1, 100)`); err != nil {
			t.Fatal(err)
		}
		balance := func() string {
			t.Helper()
			var b string
			if err := office.Conn.QueryRow(ctx, `SELECT balance::text FROM accounts WHERE id = 1`).Scan(&b); err != nil {
				t.Fatal(err)
			}
			return b
		}
		if _, err := conns.Create(ctx, h.org, audit.System, dbconn.Input{Name: "erp", DSN: office.DSN}); err != nil {
			t.Fatal(err)
		}
		svc := &bookings{}
		srv := httptest.NewServer(svc)
		defer srv.Close()
		wf := h.workflow(fmt.Sprintf(`{"name": "ERP once %d", "settings": {"retryPolicy": {"maxRetries": 0}, "rollbackOnFailure": true},
		  "steps": [
		    {"id": "refund", "type": "transform", "config": {"output": {"amount": 25}},
		     "compensation": {"compensationType": "database_operation",
		       "config": {"connection": "erp", "sqlTemplate": "UPDATE accounts SET balance = balance - $1 WHERE id = 1", "params": ["{{ step.output.amount }}"]},
		       "retryPolicy": {"maxRetries": 2, "initialDelayMs": 1000, "jitterRatio": 0}}},
		    {"id": "file", "type": "http", "config": {"method": "POST", "url": "%s/fail"}}]}`, time.Now().UnixNano(), srv.URL))
		ex := h.start(wf, `{}`)
		done := h.waitRollback(ex.ID)
		cs := h.compensations(ex.ID)
		if *done.RollbackStatus != models.RolledBack || len(cs) != 1 || *cs[0].Status != models.CompCompleted || cs[0].Attempts != 2 {
			t.Fatalf("rollback %s: %+v", *done.RollbackStatus, cs)
		}
		if b := balance(); b != "75.00" {
			t.Errorf("balance %s after a compensation run twice, want 75.00 (debited once)", b)
		}
		lost.mu.Lock()
		runs := slices.Clone(lost.runs)
		lost.mu.Unlock()
		if len(runs) != 2 || runs[0] != (dbconn.Result{RowsAffected: 1}) || runs[1] != (dbconn.Result{RowsAffected: 1, Replayed: true}) {
			t.Errorf("runs %+v", runs)
		}
		result := func() map[string]any {
			t.Helper()
			var c models.CompensationAction
			if err := db.Conn(ctx).First(&c, "id = ?", cs[0].ID).Error; err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(c.Result, &m); err != nil {
				t.Fatal(err)
			}
			return m
		}
		if m := result(); m["rowsAffected"] != float64(1) || m["replayed"] != true {
			t.Errorf("result %v", m)
		}

		// The compensation taken back and run again at the next generation (as the
		// reconciler does when a lease runs out): its key is found again.
		gen := cs[0].Generation + 1
		if err := db.Conn(ctx).Model(&models.CompensationAction{}).Where("id = ?", cs[0].ID).
			Updates(map[string]any{"status": models.CompPending, "generation": gen, "result": nil}).Error; err != nil {
			t.Fatal(err)
		}
		if err := h.eng.RunCompensation(ctx, cs[0].ID, gen); err != nil {
			t.Fatal(err)
		}
		if b := balance(); b != "75.00" {
			t.Errorf("balance %s after a third run, want 75.00", b)
		}
		if c := h.compensations(ex.ID)[0]; *c.Status != models.CompCompleted {
			t.Errorf("third run: %s", *c.Status)
		}
		if m := result(); m["rowsAffected"] != float64(1) || m["replayed"] != true {
			t.Errorf("result of the third run %v", m)
		}
	})
}
