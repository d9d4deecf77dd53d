package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestTransientCommitErrorsKeepTheResult: when the commit of a finished step fails with a
// serialization failure, a deadlock, the connection limit or a statement timeout (40001,
// 40P01, 53300, 57014: the database is there but could not take the statement now), the
// worker keeps the result and commits it again, as in an outage: the step is sent once and
// the execution succeeds at once, not after its lease. PostgreSQL only (SQLite's busy and
// locked errors are the outage tests').
func TestTransientCommitErrorsKeepTheResult(t *testing.T) {
	t.Parallel()
	db := modeltest.New(t, models.Postgres)
	ctx := context.Background()
	// Each of the first four successes to be committed fails with the next code. A sequence
	// counts them: it is not rolled back with the transaction that fails.
	if err := db.Conn(ctx).Exec(`
		CREATE SEQUENCE fail_commit_seq;
		CREATE FUNCTION fail_commit() RETURNS trigger AS $$
		DECLARE n bigint := nextval('fail_commit_seq');
		BEGIN
			IF n <= 4 THEN
				RAISE EXCEPTION 'injected failure %', n USING ERRCODE = (ARRAY['40001', '40P01', '53300', '57014'])[n];
			END IF;
			RETURN NEW;
		END $$ LANGUAGE plpgsql;
		CREATE TRIGGER fail_commit BEFORE UPDATE ON step_executions FOR EACH ROW
			WHEN (NEW.status = 'SUCCEEDED' AND OLD.status = 'RUNNING') EXECUTE FUNCTION fail_commit();`).Error; err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		fmt.Fprint(w, `{"filed": true}`)
	}))
	defer svc.Close()
	h := newHarness(t, db)
	wf := h.workflow(fmt.Sprintf(`{"name": "JPK", "steps": [{"id": "file", "type": "http", "timeoutMs": 60000, "config": {"method": "POST", "url": %q}}]}`, svc.URL))
	ex := h.start(wf, `{}`)
	if got := h.wait(ex.ID, 20*time.Second); got.Status != models.ExecSucceeded {
		t.Fatalf("status %s", got.Status)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the step was sent %d times, want once", n)
	}
	var n int64
	db.Conn(ctx).Raw("SELECT last_value FROM fail_commit_seq").Scan(&n)
	if n < 5 {
		t.Fatalf("the trigger ran %d times: the four failures were not all injected", n)
	}
}
