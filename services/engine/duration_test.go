package engine_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestAttemptDurationsMeasured: every attempt that ran records how long its request took
// (duration_us), on both databases and on each path that records one: a failure scheduled
// for retry, and a success (on PostgreSQL the one-statement record). The service answers
// after at least 5 ms, so its attempts took at least that; the in-process transform took
// some time, never none.
func TestAttemptDurationsMeasured(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		clock := modeltest.Clock(t, db)
		h := newHarness(t, db)
		svc := &scripted{script: []int{503}}
		const serviceTime = 5 * time.Millisecond
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(serviceTime) // the service's own time, which the attempt's duration includes
			svc.ServeHTTP(w, r)
		}))
		defer srv.Close()
		ex := h.start(h.workflow(httpDef(srv.URL, fastPolicy)), `{"nip": "5260250274"}`)
		if got := h.waitMoving(clock, ex.ID, 10*time.Second); got.Status != models.ExecSucceeded {
			t.Fatalf("status %s, want SUCCEEDED", got.Status)
		}
		seen := map[string]bool{}
		for _, a := range h.attempts(ex.ID) {
			seen[a.StepID+" "+a.Status] = true
			switch {
			case a.DurationUs == nil:
				t.Errorf("%s attempt %d (%s): no duration", a.StepID, a.Attempt, a.Status)
			case a.StepID == "fetch" && time.Duration(*a.DurationUs)*time.Microsecond < serviceTime:
				t.Errorf("fetch attempt %d: %d µs, less than the service took", a.Attempt, *a.DurationUs)
			case *a.DurationUs < 1:
				t.Errorf("%s attempt %d: %d µs", a.StepID, a.Attempt, *a.DurationUs)
			}
		}
		if !seen["fetch "+models.StepRetrying] || !seen["fetch "+models.StepSucceeded] || !seen["sum "+models.StepSucceeded] {
			t.Errorf("attempts seen: %v", seen)
		}
	})
}
