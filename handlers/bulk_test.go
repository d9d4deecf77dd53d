package handlers_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/bulk"
	"lifeline/services/engine"
)

// switchable is a loopback service that refuses (400) until it is switched on.
func switchable(t testing.TB) (*httptest.Server, *atomic.Bool) {
	var on atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if !on.Load() {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error": "period not open yet"}`)
			return
		}
		fmt.Fprint(w, `{"ok": true}`)
	}))
	t.Cleanup(srv.Close)
	return srv, &on
}

// deadLetters starts n executions of workflow wf and waits until all are dead letters.
func (a *app) deadLetters(org, wf string, n int) {
	a.t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		if _, _, err := a.eng.Start(ctx, engine.StartRequest{OrganizationID: org, WorkflowID: wf, Input: []byte(fmt.Sprintf(`{"client": "Klient %d"}`, i))}); err != nil {
			a.t.Fatal(err)
		}
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		var got int64
		a.db.Conn(ctx).Model(&models.DeadLetter{}).Where("workflow_id = ? AND status = ?", wf, models.DLQPending).Count(&got)
		if int(got) == n {
			return
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("%d of %d dead letters", got, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestBulkRetryByFilter(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Bulk")
		svc, on := switchable(t)
		def := func(name string) string {
			return fmt.Sprintf(`{"name": %q, "settings": {"subject": "{{ input.client }}", "retryPolicy": {"maxRetries": 0}},
			  "steps": [{"id": "send", "type": "http", "config": {"method": "POST", "url": "%s/send"}}]}`, name, svc.URL)
		}
		wf, err := a.wfs.Create(context.Background(), tn.org, actorSystem, []byte(def("JPK wysyłka")))
		if err != nil {
			t.Fatal(err)
		}
		other, err := a.wfs.Create(context.Background(), tn.org, actorSystem, []byte(def("Inny przepływ")))
		if err != nil {
			t.Fatal(err)
		}
		n := 1000 // issue 8: a bulk retry of 1,000 items by filter
		if raceDetector {
			n = 100 // the same path, at the race detector's pace
		}
		a.deadLetters(tn.org, wf.ID, n)
		a.deadLetters(tn.org, other.ID, 3)
		on.Store(true)
		post := func(token, body string) resp {
			return do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/dlq/bulk", body, bearer(token))
		}

		accToken, _, err := a.as.CreateToken(context.Background(), tn.org, models.RoleAccountant, "księgowa")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name, token, body string
			status            int
			field             string
		}{
			{"viewer", tn.viewerToken, `{"action": "retry", "filter": {"workflowId": "` + wf.ID + `"}}`, 403, ""},
			// An accountant closes in bulk too, with a note saying why (as for one item).
			{"accountant resolves without a note", accToken, `{"action": "resolve", "ids": ["` + tn.dlqID + `"]}`, 422, "resolutionNotes"},
			{"accountant skips without a note", accToken, `{"action": "skip", "filter": {"workflowId": "` + wf.ID + `"}}`, 422, "resolutionNotes"},
			// An accountant retries in bulk, as they retry one item.
			{"accountant retries", accToken, `{"action": "retry", "ids": ["` + tn.dlqID + `"]}`, 202, ""},
			{"no selection", tn.token, `{"action": "retry"}`, 422, "ids"},
			{"unknown action", tn.token, `{"action": "retry_modified", "ids": ["` + tn.dlqID + `"]}`, 422, "action"},
			{"bad filter key value", tn.token, `{"action": "retry", "filter": {"errorType": "cosmic"}}`, 422, "filter.errorType"},
			{"resolved items", tn.token, `{"action": "retry", "filter": {"status": "resolved"}}`, 422, "filter.status"},
			{"not an id", tn.token, `{"action": "skip", "ids": ["x"]}`, 422, "ids[0]"},
			{"another organization's id", tn.token, `{"action": "skip", "ids": ["` + models.NewID() + `"]}`, 422, "ids[0]"},
		} {
			r := post(c.token, c.body)
			if r.status != c.status || (c.field != "" && fieldsOf(t, r)[c.field] == nil) {
				t.Errorf("%s: %d %s", c.name, r.status, r.body)
			}
		}

		// The list's form asks first: every pending item of the filter counted, the newest 20
		// named, the rest counted.
		{
			browser, csrf := a.browser(tn)
			r := do(t, browser, "POST", a.srv.URL+"/dlq/bulk", url.Values{"_csrf": {csrf}, "action": {"retry"}, "scope": {"filter"}, "workflowId": {wf.ID}}.Encode(),
				map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
			if r.status != 200 || !strings.Contains(r.body, fmt.Sprintf(`data-count="%d"`, n)) || strings.Count(r.body, `data-testid="bulk-confirm-item"`) != 20 ||
				!strings.Contains(r.body, fmt.Sprintf(`data-testid="bulk-confirm-more">and %d more<`, n-20)) {
				t.Errorf("confirmation of %d items by filter: %d", n, r.status)
			}
			var newest models.DeadLetter
			db.Conn(context.Background()).Where("workflow_id = ?", wf.ID).Order("created_at DESC, id DESC").First(&newest)
			if first := regexp.MustCompile(`data-testid="bulk-confirm-item"><a href="([^"]+)"`).FindStringSubmatch(r.body); first == nil || first[1] != "/dlq/"+newest.ID {
				t.Errorf("the first item named is %v, want the newest, /dlq/%s", first, newest.ID)
			}
		}

		// Every pending item of the workflow, not only a page of them.
		bulkBody := `{"action": "retry", "filter": {"workflowId": "` + wf.ID + `"}, "resolutionNotes": "Okres otwarty"}`
		keyed := func(body string) resp {
			h := bearer(tn.token)
			h["Idempotency-Key"] = "bulk-retry-2026-10"
			return do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/dlq/bulk", body, h)
		}
		r := keyed(bulkBody)
		if r.status != http.StatusAccepted {
			t.Fatalf("bulk: %d %s", r.status, r.body)
		}
		job := r.json(t)
		id := job["id"].(string)
		if job["total"] != float64(n) {
			t.Fatalf("bulk total %v, want %d", job["total"], n)
		}
		deadline := time.Now().Add(120 * time.Second)
		var got map[string]any
		for {
			got = do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq/bulk/"+id, "", bearer(tn.token)).json(t)
			if got["status"] == models.BulkDone {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("bulk still %v: %v of %d", got["status"], got["processed"], n)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// The job's API counts its items without listing them, and pages them when asked.
		counts, _ := got["counts"].(map[string]any)
		if got["succeeded"] != float64(n) || got["failed"] != 0.0 || got["items"] != nil || counts["done"] != float64(n) || counts["pending"] != 0.0 {
			t.Fatalf("bulk result %v/%v, counts %v, items %v", got["succeeded"], got["failed"], counts, got["items"] != nil)
		}
		seen, pages, cursor := map[string]bool{}, 0, ""
		for {
			q := "?limit=300"
			if cursor != "" {
				q += "&cursor=" + url.QueryEscape(cursor)
			}
			page := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq/bulk/"+id+q, "", bearer(tn.token)).json(t)
			items, _ := page["items"].([]any)
			if len(items) == 0 || len(items) > 300 {
				t.Fatalf("page %d: %d items", pages, len(items))
			}
			for _, it := range items {
				m := it.(map[string]any)
				if d := m["deadLetterId"].(string); seen[d] || m["status"] != bulk.ItemDone {
					t.Fatalf("page %d: item %v again or not done", pages, m)
				} else {
					seen[d] = true
				}
			}
			pages++
			if cursor, _ = page["nextCursor"].(string); cursor == "" {
				break
			}
		}
		if len(seen) != n || pages != (n+299)/300 {
			t.Fatalf("paged %d items in %d pages, want %d", len(seen), pages, n)
		}
		if page := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq/bulk/"+id+"?status=failed", "", bearer(tn.token)).json(t); page["items"] != nil || page["nextCursor"] != "" {
			t.Fatalf("no failed item, got %v", page["items"])
		}
		for _, bad := range []string{"limit=0", "limit=501", "limit=x", "cursor=zz", "status=lost"} {
			r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq/bulk/"+id+"?"+bad, "", bearer(tn.token))
			field := strings.SplitN(bad, "=", 2)[0]
			if fields, _ := r.json(t)["error"].(map[string]any)["fields"].(map[string]any); r.status != http.StatusUnprocessableEntity || fields[field] == nil {
				t.Errorf("%s: %d %s", bad, r.status, r.body)
			}
		}
		// The replays run; every item of the workflow ends resolved, the other workflow's stay.
		deadline = time.Now().Add(120 * time.Second)
		for {
			var resolved, pendingOther int64
			db.Conn(context.Background()).Model(&models.DeadLetter{}).Where("workflow_id = ? AND status = ?", wf.ID, models.DLQResolved).Count(&resolved)
			db.Conn(context.Background()).Model(&models.DeadLetter{}).Where("workflow_id = ? AND status = ?", other.ID, models.DLQPending).Count(&pendingOther)
			if pendingOther != 3 {
				t.Fatalf("the other workflow's items changed: %d pending", pendingOther)
			}
			if resolved == int64(n) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d resolved", resolved, n)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/dlq/bulk/"+id+"/cancel", "", bearer(tn.token)); r.status != http.StatusConflict {
			t.Errorf("cancel a finished job: %d %s", r.status, r.body)
		}
		// The same request again with its Idempotency-Key (a client that lost the answer):
		// the same job, not a second one; the key with another request is refused.
		countJobs := func() (n int64) {
			db.Conn(context.Background()).Model(&models.BulkJob{}).Where("organization_id = ?", tn.org).Count(&n)
			return n
		}
		before := countJobs()
		if again := keyed(bulkBody); again.status != http.StatusOK || again.json(t)["id"] != id || again.header.Get("Idempotency-Replayed") != "true" {
			t.Errorf("repeated bulk request: %d %s", again.status, again.body)
		}
		if other := keyed(`{"action": "skip", "filter": {"workflowId": "` + wf.ID + `"}}`); other.status != http.StatusUnprocessableEntity || fieldsOf(t, other)["Idempotency-Key"] == nil {
			t.Errorf("the key with another request: %d %s", other.status, other.body)
		}
		if after := countJobs(); after != before {
			t.Errorf("%d bulk jobs after the repeated requests, %d before", after, before)
		}

		// In the browser: select two rows of the other workflow and skip them; the progress
		// page shows the results. Then cancel a job before it runs.
		browser, csrf := a.browser(tn)
		// An accountant's list offers every bulk action (closing asks for a note).
		acc := *tn
		acc.email = "ksiegowa." + tn.email
		if _, err := a.as.CreateUser(context.Background(), tn.org, acc.email, acc.password, models.RoleAccountant); err != nil {
			t.Fatal(err)
		}
		accBrowser, _ := a.browser(&acc)
		if page := do(t, accBrowser, "GET", a.srv.URL+"/dlq/items", "", nil).body; !strings.Contains(page, `data-testid="bulk-action"`) ||
			!strings.Contains(page, `<option value="retry">`) || !strings.Contains(page, `<option value="resolve">`) || !strings.Contains(page, `<option value="skip">`) {
			t.Error("the accountant's bulk form: retry, resolve and skip expected")
		}
		// The retry's page: each item's replay started, and the item now resolved (how the
		// replay ended), not just "done".
		if page := do(t, browser, "GET", a.srv.URL+"/dlq/bulk/"+id, "", nil).body; !strings.Contains(page, "Retry started") ||
			!strings.Contains(page, `data-testid="bulk-item-now"><span class="badge badge--ok" data-testid="status" data-status="resolved"`) {
			t.Errorf("the retry's progress page does not show the items' status now")
		}
		// Once every retry ended, the page says how they did (issue 21).
		if page := do(t, browser, "GET", a.srv.URL+"/dlq/bulk/"+id, "", nil).body; !regexp.MustCompile(`data-testid="bulk-summary">Fixed [1-9][0-9]* · back in the queue 0 · refused 0<`).MatchString(page) ||
			strings.Contains(page, `hx-trigger="every 1s"`) {
			t.Errorf("the finished retry's page has no summary, or still refreshes itself")
		}
		// The page lists its items a page at a time (100), with a link to the next; a status
		// filter shows that status's items, with the counts.
		first := do(t, browser, "GET", a.srv.URL+"/dlq/bulk/"+id, "", nil).body
		if got := strings.Count(first, `data-testid="bulk-item" `); got != min(n, 100) || strings.Contains(first, `data-testid="bulk-next"`) != (n > 100) ||
			!strings.Contains(first, `data-testid="bulk-filter" data-status="done"`) {
			t.Errorf("the first page lists %d items (of %d), next link %v", got, n, strings.Contains(first, `data-testid="bulk-next"`))
		}
		if m := regexp.MustCompile(`data-testid="bulk-next" href="([^"]+)"|href="([^"]+)" data-testid="bulk-next"`).FindStringSubmatch(first); m != nil {
			next := html.UnescapeString(m[1] + m[2])
			second := do(t, browser, "GET", a.srv.URL+next, "", nil)
			firstRow := regexp.MustCompile(`data-testid="bulk-item" [^>]*>\s*<td class="cell-main"><a href="([^"]+)"`)
			a1, a2 := firstRow.FindStringSubmatch(first), firstRow.FindStringSubmatch(second.body)
			if second.status != 200 || a1 == nil || a2 == nil || a1[1] == a2[1] || !strings.Contains(second.body, `data-testid="bulk-first"`) {
				t.Errorf("the next page: %d, same first item %v", second.status, a1 != nil && a2 != nil && a1[1] == a2[1])
			}
		}
		if failedOnly := do(t, browser, "GET", a.srv.URL+"/dlq/bulk/"+id+"?status=failed", "", nil).body; strings.Contains(failedOnly, `data-testid="bulk-item" `) ||
			!strings.Contains(failedOnly, `data-testid="bulk-filter-all"`) {
			t.Errorf("the failed items' filter lists items, or has no way back")
		}
		var ids []string
		db.Conn(context.Background()).Model(&models.DeadLetter{}).Where("workflow_id = ?", other.ID).Order("created_at").Limit(2).Pluck("id", &ids)
		postForm := func(form url.Values) resp {
			return do(t, browser, "POST", a.srv.URL+"/dlq/bulk", form.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		}
		jobs := func() int64 {
			var n int64
			db.Conn(context.Background()).Model(&models.BulkJob{}).Count(&n)
			return n
		}
		jobsBefore := jobs()
		// Nothing selected: the page says so and offers the way back (422); nothing starts.
		if r := postForm(url.Values{"_csrf": {csrf}, "action": {"skip"}, "scope": {"selected"}, "workflowId": {other.ID}}); r.status != 422 ||
			!strings.Contains(r.body, `data-testid="bulk-problem"`) || !strings.Contains(r.body, "No item is selected") ||
			!strings.Contains(r.body, `href="/dlq/items?workflowId=`+other.ID+`" data-testid="bulk-back"`) {
			t.Errorf("empty bulk form: %d %s", r.status, r.body)
		}
		// The form first asks: how many, what happens, notes; it sends the items again.
		form := url.Values{"_csrf": {csrf}, "action": {"skip"}, "ids": ids}
		r = postForm(form)
		if r.status != 200 || !strings.Contains(r.body, `data-testid="bulk-confirm-count" data-count="2"`) || !strings.Contains(r.body, "Close 2 items as skipped") ||
			!strings.Contains(r.body, `name="ids" value="`+ids[1]+`"`) || !strings.Contains(r.body, `name="confirm" value="1"`) || !strings.Contains(r.body, `data-testid="bulk-notes"`) {
			t.Fatalf("bulk confirmation: %d %s", r.status, r.body)
		}
		if got := strings.Count(r.body, `data-testid="bulk-confirm-item"`); got != 2 || !strings.Contains(r.body, `href="/dlq/`+ids[0]+`"`) {
			t.Errorf("the confirmation names %d items, want the 2 selected", got)
		}
		if n := jobs(); n != jobsBefore {
			t.Fatalf("the confirmation started %d bulk jobs", n-jobsBefore)
		}
		confirmed := func(form url.Values, page string) url.Values {
			out := url.Values{}
			for k, v := range form {
				out[k] = v
			}
			out.Set("confirm", "1")
			for _, k := range []string{"token", "nonce"} {
				m := regexp.MustCompile(`name="` + k + `" value="([^"]+)"`).FindStringSubmatch(page)
				if m == nil {
					t.Fatalf("the confirmation has no %s", k)
				}
				out.Set(k, m[1])
			}
			return out
		}
		// Confirmed twice (a double click): one job.
		form = confirmed(form, r.body)
		r = postForm(form)
		loc := r.header.Get("Location")
		if r.status != http.StatusSeeOther || !strings.HasPrefix(loc, "/dlq/bulk/") {
			t.Fatalf("bulk form: %d %s", r.status, r.body)
		}
		if again := postForm(form); again.status != http.StatusSeeOther || again.header.Get("Location") != loc || jobs() != jobsBefore+1 {
			t.Errorf("a second click: %d %s, %d jobs", again.status, again.header.Get("Location"), jobs()-jobsBefore)
		}
		deadline = time.Now().Add(30 * time.Second)
		for {
			page := do(t, browser, "GET", a.srv.URL+loc, "", nil)
			if strings.Contains(page.body, `data-testid="bulk" data-status="done"`) {
				if strings.Count(page.body, `data-testid="bulk-item" data-status="done"`) != 2 || !strings.Contains(page.body, "Klient") {
					t.Errorf("progress page: %s", page.body)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the skip did not finish")
			}
			time.Sleep(100 * time.Millisecond)
		}
		var skipped int64
		db.Conn(context.Background()).Model(&models.DeadLetter{}).Where("id IN ? AND status = ?", ids, models.DLQSkipped).Count(&skipped)
		if skipped != 2 {
			t.Errorf("%d skipped, want 2", skipped)
		}
		// The same items again: none is pending, nothing to do.
		if r := postForm(url.Values{"_csrf": {csrf}, "action": {"retry"}, "ids": ids}); r.status != 422 || !strings.Contains(r.body, "None of the selected items is pending") {
			t.Errorf("bulk of closed items: %d", r.status)
		}

		// The list's bulk form: checkboxes on pending rows, the filter's keys sent along;
		// "every matching item" resolves the other workflow's last pending item.
		list := do(t, browser, "GET", a.srv.URL+"/dlq/items?workflowId="+other.ID, "", nil)
		if !strings.Contains(list.body, `data-testid="bulk-form"`) || strings.Count(list.body, `data-testid="dlq-select"`) != 1 ||
			!strings.Contains(list.body, `name="workflowId" value="`+other.ID+`" form="bulk-form"`) {
			t.Fatalf("the list's bulk form: %s", list.body)
		}
		form = url.Values{"_csrf": {csrf}, "action": {"resolve"}, "scope": {"filter"}, "workflowId": {other.ID}}
		if r := postForm(form); r.status != 200 || !strings.Contains(r.body, `data-count="1"`) || !strings.Contains(r.body, "1 pending item matches the filter.") {
			t.Errorf("confirmation by filter: %d %s", r.status, r.body)
		}
		r = postForm(form)
		// Another failure matches the filter before the confirmation: it is shown again, with
		// the new count, and nothing starts (409); confirmed again, it runs.
		on.Store(false)
		if _, _, err := a.eng.Start(context.Background(), engine.StartRequest{OrganizationID: tn.org, WorkflowID: other.ID, Input: []byte(`{"client": "Nowy"}`)}); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			var pending int64
			db.Conn(context.Background()).Model(&models.DeadLetter{}).Where("workflow_id = ? AND status = ?", other.ID, models.DLQPending).Count(&pending)
			if pending == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d pending, want 2", pending)
			}
		}
		on.Store(true)
		form = confirmed(form, r.body)
		form.Set("notes", "Zamknięte w banku")
		if r = postForm(form); r.status != http.StatusConflict || !strings.Contains(r.body, `data-testid="bulk-changed"`) || !strings.Contains(r.body, `data-count="2"`) {
			t.Fatalf("confirmation of a changed set: %d %s", r.status, r.body)
		}
		form = confirmed(form, r.body)
		r = postForm(form)
		if r.status != http.StatusSeeOther {
			t.Fatalf("bulk by filter from the page: %d %s", r.status, r.body)
		}
		deadline = time.Now().Add(30 * time.Second)
		for {
			var left int64
			db.Conn(context.Background()).Model(&models.DeadLetter{}).Where("workflow_id = ? AND status = ?", other.ID, models.DLQPending).Count(&left)
			if left == 0 {
				var notes int64
				db.Conn(context.Background()).Model(&models.DeadLetter{}).Where("workflow_id = ? AND status = ? AND resolution_notes = ?", other.ID, models.DLQResolved, "Zamknięte w banku").Count(&notes)
				if notes != 2 {
					t.Errorf("%d items resolved with the confirmation's notes, want 2", notes)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d still pending", left)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}
