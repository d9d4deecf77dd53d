package engine_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/dbconn"
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
		h := newHarness(t, db)
		ctx := context.Background()
		// The ERP: a PostgreSQL database of its own with a clients table, reached as a role
		// that is not a superuser, on another port than Lifeline's own database server
		// (which connections never reach).
		office := modeltest.OfficeDatabase(t)
		erp := office.Conn
		if _, err := erp.Exec(ctx, `CREATE TABLE clients (id int PRIMARY KEY, note text); INSERT INTO clients VALUES (1, 'booked')`); err != nil {
			t.Fatal(err)
		}
		conns := dbconn.New(db, dbconn.Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Own: []string{office.Server}})
		if _, err := conns.Create(ctx, h.org, audit.System, dbconn.Input{Name: "erp", Driver: "postgres", DSN: office.DSN}); err != nil {
			t.Fatal(err)
		}
		h.eng.SetDatabases(conns)
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
