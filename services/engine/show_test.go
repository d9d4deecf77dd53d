package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// A step that a worker runs right after its predecessor is not written as the execution's
// current step at once (fast steps go by unseen), but one that keeps running is shown.
func TestLongRunningStepIsShownAsCurrent(t *testing.T) {
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		arrived, release := make(chan struct{}, 1), make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			arrived <- struct{}{}
			<-release
			fmt.Fprint(w, `{"ok": true}`)
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() {
			select {
			case <-release:
			default:
				close(release)
			}
		})
		h := newHarness(t, db)
		wf := h.workflow(fmt.Sprintf(`{"name": "Show", "steps": [
		  {"id": "prepare", "type": "transform", "config": {"output": {"ok": true}}},
		  {"id": "file", "type": "http", "config": {"method": "POST", "url": %q}},
		  {"id": "done", "type": "transform", "config": {"output": {"ok": true}}}]}`, srv.URL))
		ex := h.start(wf, `{}`)
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("the http step never ran")
		}
		current := func() string {
			var got models.Execution
			if err := db.Conn(context.Background()).First(&got, "id = ?", ex.ID).Error; err != nil {
				t.Fatal(err)
			}
			if got.CurrentStepID == nil {
				return ""
			}
			return *got.CurrentStepID
		}
		deadline := time.Now().Add(5 * time.Second)
		for current() != "file" {
			if time.Now().After(deadline) {
				t.Fatalf("while step file runs, the execution's current step is %q", current())
			}
			time.Sleep(50 * time.Millisecond)
		}
		close(release)
		if got := h.wait(ex.ID, 10*time.Second); got.Status != models.ExecSucceeded || got.CurrentStepID != nil {
			t.Fatalf("execution %s, current step %v; want SUCCEEDED with none", got.Status, got.CurrentStepID)
		}
	})
}
