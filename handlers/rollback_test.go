package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
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
		svc, cancels := bookingService(t)
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
		// The undone steps read "undone", not "succeeded"; the rollback leads the page, above
		// the retry it leaves.
		if p := page(admin); strings.Count(p, `data-status="COMPENSATED"`) != 2 || !strings.Contains(p, ">Undone<") ||
			(strings.Contains(p, `data-testid="recovery"`) && strings.Index(p, `data-testid="rollback"`) > strings.Index(p, `data-testid="recovery"`)) {
			t.Errorf("the rolled-back execution's page does not read its steps as undone, or puts the rollback below the retry")
		}
		if got := cancels(); len(got) != 1 || got[0] != "/cancel/B-7" {
			t.Errorf("cancellations %v", got)
		}
	})
}

// TestRollbackFromDLQItem: an admin starts a rollback from a dead letter, on its page or
// through the API; an accountant does not get the form, and another organization gets 404.
// Once rolled back, the item warns that retries run against undone steps.
func TestRollbackFromDLQItem(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Cofanie DLQ")
		other := a.tenant("Inne Biuro Cofanie")
		svc, _ := bookingService(t)
		wf, err := a.wfs.Create(context.Background(), rs.org, actorSystem, []byte(fmt.Sprintf(`{"name": "Księgowanie", "settings": {"retryPolicy": {"maxRetries": 0}},
		  "steps": [
		    {"id": "book", "type": "http", "config": {"method": "POST", "url": "%[1]s/book"},
		     "compensation": {"compensationType": "api_call", "config": {"method": "DELETE", "endpoint": "%[1]s/cancel/{{ step.output.id }}"}}},
		    {"id": "file", "type": "http", "config": {"method": "POST", "url": "%[1]s/fail"}}]}`, svc.URL)))
		if err != nil {
			t.Fatal(err)
		}
		// deadLetter starts an execution and waits for its dead letter: (execution, item).
		deadLetter := func() (string, string) {
			t.Helper()
			exID := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wf.ID+"/executions", `{"input": {}}`, bearer(rs.token)).json(t)["id"].(string)
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				if id, _ := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions/"+exID, "", bearer(rs.token)).json(t)["dlqId"].(string); id != "" {
					return exID, id
				}
				if time.Now().After(deadline) {
					t.Fatal("no dead letter")
				}
			}
		}
		rolledBack := func(exID string) {
			t.Helper()
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				if do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions/"+exID, "", bearer(rs.token)).json(t)["rollbackStatus"] == models.RolledBack {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s never rolled back", exID)
				}
			}
		}
		admin, csrf := a.browser(rs.tenant)
		acc, _ := a.browser(rs.accountant)
		item := func(c *http.Client, id string) string { return do(t, c, "GET", a.srv.URL+"/dlq/"+id, "", nil).body }

		// On the page: the admin's form posts to the execution's rollback and lands on its panel.
		ex1, dl1 := deadLetter()
		if p := item(admin, dl1); !strings.Contains(p, `action="/executions/`+ex1+`/rollback" class="form settle" data-testid="form-rollback"`) {
			t.Fatalf("no rollback form for the admin: %s", p)
		}
		if p := item(acc, dl1); strings.Contains(p, `data-testid="form-rollback"`) {
			t.Error("the accountant gets the rollback form")
		}
		r := do(t, admin, "POST", a.srv.URL+"/executions/"+ex1+"/rollback", url.Values{"_csrf": {csrf}}.Encode(),
			map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/executions/"+ex1+"#rollback" {
			t.Fatalf("the form: %d %s", r.status, r.header.Get("Location"))
		}
		rolledBack(ex1)
		if p := item(admin, dl1); strings.Contains(p, `data-testid="form-rollback"`) || !strings.Contains(p, `data-testid="rolled-back-warning"`) {
			t.Errorf("the rolled-back item: a form again, or no warning")
		}
		// Its steps at the failure: the booking, undone since, says so.
		page := item(admin, dl1)
		book, file := strings.Index(page, `data-testid="timeline-step" data-step="book"`), strings.Index(page, `data-testid="timeline-step" data-step="file"`)
		if book < 0 || file < book || !strings.Contains(page[book:file], `data-status="COMPENSATED"`) ||
			strings.Contains(page[book:file], `data-status="SUCCEEDED"`) || !strings.Contains(page[file:], `data-status="DLQ"`) {
			t.Errorf("the rolled-back item's steps: the booking is not shown undone")
		}
		// Its completed steps were undone: their outputs are not reused. Only a retry of the
		// entire workflow is offered, and the engine refuses the others.
		p := item(admin, dl1)
		for _, gone := range []string{"form-retry", "form-resume", "skip-section", "policy-section"} {
			if strings.Contains(p, `data-testid="`+gone+`"`) {
				t.Errorf("the rolled-back item offers %s", gone)
			}
		}
		if !strings.Contains(p, `data-testid="form-full"`) || !strings.Contains(p, `name="mode" value="full"`) {
			t.Error("the rolled-back item does not offer a full retry, or its edit form does not start one")
		}
		actions := a.srv.URL + "/api/v1/dlq/" + dl1 + "/actions"
		for _, body := range []string{`{"action": "retry"}`, `{"action": "retry", "fromStepId": "book"}`, `{"action": "retry_modified", "modifiedInput": {"x": 1}}`} {
			if r := do(t, http.DefaultClient, "POST", actions, body, bearer(rs.token)); r.status != http.StatusConflict || !strings.Contains(r.body, "rolled back") {
				t.Errorf("replay %s of a rolled-back execution: %d %s", body, r.status, r.body)
			}
		}
		form := url.Values{"_csrf": {csrf}, "action": {"edit"}, "mode": {"full"}, "input": {`{"fixed": true}`}}
		r = do(t, admin, "POST", a.srv.URL+"/dlq/"+dl1+"/actions", form.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		if r.status != http.StatusSeeOther {
			t.Fatalf("edit and retry the entire workflow: %d %s", r.status, r.body)
		}
		var full models.Execution
		for deadline := time.Now().Add(20 * time.Second); db.Conn(context.Background()).Where("retry_of = ?", ex1).First(&full).Error != nil; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the edited full retry started no execution")
			}
		}
		if !strings.Contains(string(full.Input), `"fixed"`) {
			t.Errorf("the full retry's input %s", full.Input)
		}

		// Through the API, by the item's id.
		ex2, dl2 := deadLetter()
		u := a.srv.URL + "/api/v1/dlq/" + dl2 + "/rollback"
		if r := do(t, http.DefaultClient, "POST", u, "", bearer(rs.accountantToken)); r.status != http.StatusForbidden {
			t.Errorf("accountant: %d", r.status)
		}
		if r := do(t, http.DefaultClient, "POST", u, "", bearer(other.token)); r.status != http.StatusNotFound {
			t.Errorf("another organization: %d", r.status)
		}
		r = do(t, http.DefaultClient, "POST", u, "", bearer(rs.token))
		// The one compensation may have finished before the answer was written.
		if st := r.json(t)["rollbackStatus"]; r.status != http.StatusAccepted || r.json(t)["id"] != ex2 || (st != models.RollingBack && st != models.RolledBack) {
			t.Fatalf("start by the item: %d %s", r.status, r.body)
		}
		if r := do(t, http.DefaultClient, "POST", u, "", bearer(rs.token)); r.status != http.StatusConflict {
			t.Errorf("second start: %d", r.status)
		}
		rolledBack(ex2)

		// A failure with nothing to undo (no step completed): no rollback to start, even with
		// rollbackOnFailure, and none offered; a retry from the failed step stays possible.
		first, err := a.wfs.Create(context.Background(), rs.org, actorSystem, []byte(fmt.Sprintf(`{"name": "Od razu błąd",
		  "settings": {"retryPolicy": {"maxRetries": 0}, "rollbackOnFailure": true},
		  "steps": [{"id": "file", "type": "http", "config": {"method": "POST", "url": "%[1]s/fail"}},
		    {"id": "book", "type": "http", "config": {"method": "POST", "url": "%[1]s/book"},
		     "compensation": {"compensationType": "api_call", "config": {"endpoint": "%[1]s/cancel/x"}}}]}`, svc.URL)))
		if err != nil {
			t.Fatal(err)
		}
		ex3 := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+first.ID+"/executions", `{"input": {}}`, bearer(rs.token)).json(t)["id"].(string)
		var m map[string]any
		for deadline := time.Now().Add(20 * time.Second); m["status"] != models.ExecDLQPending; time.Sleep(50 * time.Millisecond) {
			m = do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions/"+ex3, "", bearer(rs.token)).json(t)
			if time.Now().After(deadline) {
				t.Fatalf("execution %v", m["status"])
			}
		}
		if m["rollbackStatus"] != nil {
			t.Errorf("a rollback with nothing to undo: %v", m["rollbackStatus"])
		}
		if r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/executions/"+ex3+"/rollback", "", bearer(rs.token)); r.status != http.StatusConflict {
			t.Errorf("start a rollback with nothing to undo: %d %s", r.status, r.body)
		}
		if p := do(t, admin, "GET", a.srv.URL+"/executions/"+ex3, "", nil).body; strings.Contains(p, `data-testid="rollback"`) || !strings.Contains(p, `data-testid="form-retry"`) {
			t.Error("the execution with nothing to undo offers a rollback, or no retry from the failed step")
		}

		// Bulk: a retry of rolled-back items says beforehand that it will be refused for them,
		// and why; the whole-workflow retry says nothing of the kind (issue 21).
		confirm := func(action string) string {
			form := url.Values{"_csrf": {csrf}, "action": {action}, "scope": {"selected"}, "ids": {dl2}}
			return do(t, admin, "POST", a.srv.URL+"/dlq/bulk", form.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"}).body
		}
		if p := confirm("retry"); !strings.Contains(p, `data-testid="bulk-refusals"`) || !strings.Contains(p, "Retry the whole workflow") {
			t.Error("a bulk retry of a rolled-back item does not warn that it will be refused")
		}
		if p := confirm("retry_full"); strings.Contains(p, `data-testid="bulk-refusals"`) {
			t.Error("a bulk whole-workflow retry warns of refusals")
		}

		// The executions list finds rolled-back executions (its status filter, in the API and
		// on the page) and marks them.
		if got := apiIDs(t, do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions?status=ROLLED_BACK", "", bearer(rs.token))); !slices.Equal(got, []string{ex2, ex1}) {
			t.Errorf("API filter ROLLED_BACK: %v, want %v", got, []string{ex2, ex1})
		}
		doc := parseListDoc(t, do(t, admin, "GET", a.srv.URL+"/executions", "", nil).body)
		key := doc.formKey(t, "filter-status")
		list := do(t, admin, "GET", a.srv.URL+"/executions?"+url.Values{key: {models.RolledBack}}.Encode(), "", nil).body
		if got := parseListDoc(t, list).rowIDs("execution-row"); !slices.Equal(got, []string{ex2, ex1}) || strings.Count(list, `data-testid="rollback-badge" data-status="ROLLED_BACK"`) != 2 {
			t.Errorf("page filter ROLLED_BACK: %v", got)
		}
	})
}

// bookingService books (/book answers {"id": "B-7"}), cancels (/cancel/…, recorded in
// order) and refuses every other path with 400; cancels returns the cancellations so far.
func bookingService(t *testing.T) (svc *httptest.Server, cancels func() []string) {
	var mu sync.Mutex
	var got []string
	svc = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/book":
			fmt.Fprint(w, `{"id": "B-7"}`)
		case strings.HasPrefix(r.URL.Path, "/cancel/"):
			mu.Lock()
			got = append(got, r.URL.Path)
			mu.Unlock()
			fmt.Fprint(w, `{"ok": true}`)
		default:
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error": "refused"}`)
		}
	}))
	t.Cleanup(svc.Close)
	return svc, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}
