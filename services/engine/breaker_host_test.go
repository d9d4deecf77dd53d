package engine_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/breaker"
)

// hostBreaker is the organization's breaker of a host, or nil.
func (h *harness) hostBreaker(host string) *models.CircuitBreaker {
	h.t.Helper()
	var rows []models.CircuitBreaker
	if err := h.db.Conn(context.Background()).Where("organization_id = ? AND scope_key = ?", h.org, "host:"+host).Find(&rows).Error; err != nil {
		h.t.Fatal(err)
	}
	if len(rows) == 0 {
		return nil
	}
	return &rows[0]
}

// TestBreakerHostScopeSharedInOrganizationOnly: with "scope": "host", failures of two
// workflows of one organization calling the same host trip one breaker, which then holds
// both back; a workflow of another organization calling that host has its own breaker: its
// failures do not count in the first one's, and it keeps running while the first is open.
func TestBreakerHostScopeSharedInOrganizationOnly(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		h := newHarness(t, db)
		ctx := context.Background()
		other := *h
		org2 := models.Organization{ID: models.NewID(), Name: "Inne Biuro"}
		if err := db.Conn(ctx).Create(&org2).Error; err != nil {
			t.Fatal(err)
		}
		other.org = org2.ID

		svc := &flipService{status: 503}
		srv := httptest.NewServer(svc)
		defer srv.Close()
		u, _ := url.Parse(srv.URL)
		def := func(name, path string) string {
			return fmt.Sprintf(`{"name": %q, "settings": {"retryPolicy": {"maxRetries": 0},
			  "circuitBreaker": {"scope": "host", "failureThreshold": 3, "resetTimeoutMs": 60000}},
			  "steps": [{"id": "call", "type": "http", "config": {"method": "GET", "url": %q}}]}`, name, srv.URL+path)
		}
		bank, tax := h.workflow(def("Bank", "/bank")), h.workflow(def("Tax", "/tax"))
		theirs := other.workflow(def("Their bank", "/bank"))
		fail := func(h *harness, wf *models.Workflow) {
			t.Helper()
			if got := h.wait(h.start(wf, `{}`).ID, 20*time.Second); got.Status != models.ExecDLQPending {
				t.Fatalf("%s: %s", wf.Name, got.Status)
			}
		}

		// The other organization's two failures count in its own breaker only.
		fail(&other, theirs)
		fail(&other, theirs)
		fail(h, bank)
		fail(h, bank)
		if b := h.hostBreaker(u.Host); b == nil || b.State != breaker.Closed || h.inWindow(b.ID) != 2 {
			t.Fatalf("after 2 failures of its own (and 2 of another organization): %+v", b)
		}
		// A failure of the other workflow on the same host trips the organization's breaker.
		fail(h, tax)
		b := h.hostBreaker(u.Host)
		if b == nil || b.State != breaker.Open || b.FailureCount != 3 || b.Host == nil || *b.Host != u.Host || b.WorkflowID != nil {
			t.Fatalf("after 3 failures on the host: %+v", b)
		}
		var rows int64
		db.Conn(ctx).Model(&models.CircuitBreaker{}).Where("organization_id = ?", h.org).Count(&rows)
		if rows != 1 {
			t.Errorf("%d breakers in the organization, want the host's only", rows)
		}

		// The host answers again; the other organization runs (its breaker closed, never open)…
		svc.set(200)
		calls := len(svc.calls())
		if got := other.wait(other.start(theirs, `{}`).ID, 20*time.Second); got.Status != models.ExecSucceeded {
			t.Fatalf("another organization's workflow on the open host: %s", got.Status)
		}
		if ob := other.hostBreaker(u.Host); ob == nil || ob.ID == b.ID || ob.State != breaker.Closed || other.inWindow(ob.ID) != 2 {
			t.Errorf("the other organization's breaker: %+v", ob)
		}
		// …while both workflows of this one wait on its open breaker, sending nothing.
		for _, wf := range []*models.Workflow{bank, tax} {
			a := h.waitingAttempt(h.start(wf, `{}`).ID)
			if *a.WaitingBreakerID != b.ID {
				t.Errorf("%s waits on %s, want %s", wf.Name, *a.WaitingBreakerID, b.ID)
			}
		}
		if n := len(svc.calls()) - calls; n != 1 {
			t.Errorf("%d requests while the organization's breaker is open, want 1 (the other organization's)", n)
		}
	})
}
