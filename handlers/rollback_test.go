package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

func TestRollbackAPI(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Rollback")
		other := a.tenant("Inne Biuro Rollback")
		var mu sync.Mutex
		var cancels []string
		svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			switch {
			case r.URL.Path == "/book":
				fmt.Fprint(w, `{"id": "B-7"}`)
			case strings.HasPrefix(r.URL.Path, "/cancel/"):
				mu.Lock()
				cancels = append(cancels, r.URL.Path)
				mu.Unlock()
				fmt.Fprint(w, `{"ok": true}`)
			default:
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprint(w, `{"error": "refused"}`)
			}
		}))
		defer svc.Close()
		wf, err := a.wfs.Create(context.Background(), rs.org, actorSystem, []byte(fmt.Sprintf(`{"name": "Księgowanie", "settings": {"retryPolicy": {"maxRetries": 0}},
		  "steps": [
		    {"id": "book", "type": "http", "config": {"method": "POST", "url": "%[1]s/book"},
		     "compensation": {"compensationType": "api_call", "config": {"method": "DELETE", "url": "%[1]s/cancel/{{ step.output.id }}"}}},
		    {"id": "call", "type": "transform", "config": {"output": 1},
		     "compensation": {"compensationType": "manual", "config": {"instructions": "Call the client."}}},
		    {"id": "file", "type": "http", "config": {"method": "POST", "url": "%[1]s/fail"}}]}`, svc.URL)))
		if err != nil {
			t.Fatal(err)
		}
		r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wf.ID+"/executions", `{"input": {}}`, bearer(rs.token))
		exID := r.json(t)["id"].(string)
		get := func() map[string]any {
			return do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions/"+exID, "", bearer(rs.token)).json(t)
		}
		poll := func(what string, cond func(map[string]any) bool) map[string]any {
			t.Helper()
			deadline := time.Now().Add(20 * time.Second)
			for {
				m := get()
				if cond(m) {
					return m
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: %v", what, m)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		poll("dead letter", func(m map[string]any) bool { return m["status"] == models.ExecDLQPending })
		// The page offers admins a rollback of the failed execution; an accountant sees no panel.
		admin, csrf := a.browser(rs.tenant)
		acc, _ := a.browser(rs.accountant)
		page := func(c *http.Client) string { return do(t, c, "GET", a.srv.URL+"/executions/"+exID, "", nil).body }
		if p := page(admin); !strings.Contains(p, `data-testid="action-rollback"`) {
			t.Error("no rollback button for the admin")
		}
		if p := page(acc); strings.Contains(p, `data-testid="rollback"`) {
			t.Error("the accountant sees the rollback panel")
		}
		rollbackURL := a.srv.URL + "/api/v1/executions/" + exID + "/rollback"
		if r := do(t, http.DefaultClient, "POST", rollbackURL, "", bearer(rs.accountantToken)); r.status != 403 {
			t.Errorf("accountant: %d", r.status)
		}
		if r := do(t, http.DefaultClient, "POST", rollbackURL, "", bearer(other.token)); r.status != 404 {
			t.Errorf("another organization: %d", r.status)
		}
		r = do(t, http.DefaultClient, "POST", rollbackURL, "", bearer(rs.token))
		if r.status != http.StatusAccepted || r.json(t)["rollbackStatus"] != models.RollingBack {
			t.Fatalf("start: %d %s", r.status, r.body)
		}
		if r := do(t, http.DefaultClient, "POST", rollbackURL, "", bearer(rs.token)); r.status != http.StatusConflict {
			t.Errorf("second start: %d", r.status)
		}
		// The manual compensation (call) runs first and waits; an admin confirms it.
		m := poll("manual compensation waiting", func(m map[string]any) bool {
			cs, _ := m["compensations"].([]any)
			return len(cs) == 2 && cs[0].(map[string]any)["status"] == models.CompWaiting
		})
		cs := m["compensations"].([]any)
		first, second := cs[0].(map[string]any), cs[1].(map[string]any)
		if first["stepId"] != "call" || second["stepId"] != "book" || second["status"] != models.CompPending {
			t.Fatalf("order %v", cs)
		}
		act := a.srv.URL + "/api/v1/compensations/" + first["id"].(string) + "/actions"
		if r := do(t, http.DefaultClient, "POST", act, `{"action": "confirm"}`, bearer(rs.accountantToken)); r.status != 403 {
			t.Errorf("accountant confirm: %d", r.status)
		}
		if r := do(t, http.DefaultClient, "POST", act, `{"action": "explode"}`, bearer(rs.token)); r.status != 422 {
			t.Errorf("bad action: %d", r.status)
		}
		// The admin confirms it on the page, where the instructions are shown.
		if p := page(admin); !strings.Contains(p, "Call the client.") || !strings.Contains(p, `data-testid="compensation-confirm"`) {
			t.Fatalf("the waiting compensation on the page: %s", p)
		}
		form := url.Values{"_csrf": {csrf}, "action": {"confirm"}, "execution": {exID}}
		r = do(t, admin, "POST", a.srv.URL+"/compensations/"+first["id"].(string)+"/actions", form.Encode(),
			map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/executions/"+exID+"#rollback" {
			t.Fatalf("confirm on the page: %d %s", r.status, r.header.Get("Location"))
		}
		poll("rolled back", func(m map[string]any) bool { return m["rollbackStatus"] == models.RolledBack })
		if p := page(admin); !strings.Contains(p, `data-status="ROLLED_BACK"`) || strings.Count(p, `data-testid="compensation" data-status="completed"`) != 2 {
			t.Errorf("the rolled-back execution's page: %s", p)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(cancels) != 1 || cancels[0] != "/cancel/B-7" {
			t.Errorf("cancellations %v", cancels)
		}
	})
}
