package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/html"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/engine"
)

// nipService refuses every client's NIP as the demo's office does (a 400 naming the NIP)
// until it is switched on; the NIP "000000000" it refuses always, and "down" gets a 503.
func nipService(t testing.TB) (*httptest.Server, *atomic.Bool) {
	var on atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Nip string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case body.Nip == "down":
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error": "service unavailable"}`)
		case on.Load() && body.Nip != "000000000":
			fmt.Fprint(w, `{"ok": true}`)
		default:
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error": "validation", "message": "NIP „%s” ma 9 cyfr, a powinien mieć 10"}`, body.Nip)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &on
}

// failures starts an execution of wf per NIP and waits until each is a dead letter; it
// returns their ids.
func (a *app) failures(org, wf string, nips ...string) []string {
	a.t.Helper()
	ctx := context.Background()
	var execs []string
	for _, nip := range nips {
		ex, _, err := a.eng.Start(ctx, engine.StartRequest{OrganizationID: org, WorkflowID: wf,
			Input: fmt.Appendf(nil, `{"nip": %q, "client": "Klient %s"}`, nip, nip)})
		if err != nil {
			a.t.Fatal(err)
		}
		execs = append(execs, ex.ID)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		var ids []string
		a.db.Conn(ctx).Model(&models.DeadLetter{}).Where("execution_id IN ?", execs).Pluck("id", &ids)
		if len(ids) == len(execs) {
			return ids
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("%d of %d dead letters", len(ids), len(execs))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestGroupsAPI: a failure group through the API on both databases: one cause of many
// clients is one group apart from another cause; the group's items by groupId beyond one
// page; one retry reaches every pending item of the group and nothing outside it, and not
// an item that joins the group after it was asked for; mute; split; another organization's
// group is 404; viewers read, accountants act (with a note to close).
func TestGroupsAPI(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Grupy")
		other := a.tenant("Biuro Obce")
		svc, on := nipService(t)
		ctx := context.Background()
		wf, err := a.wfs.Create(ctx, tn.org, actorSystem, fmt.Appendf(nil, `{"name": "VAT-7", "settings": {"subject": "{{ input.client }}", "retryPolicy": {"maxRetries": 0}},
		  "steps": [{"id": "send", "type": "http", "config": {"method": "POST", "url": "%s/send", "body": {"nip": "{{ input.nip }}"}}}]}`, svc.URL))
		if err != nil {
			t.Fatal(err)
		}
		n := 60 // more than one page (50) of the list
		nips := make([]string, n)
		for i := range nips {
			nips[i] = fmt.Sprintf("5261040%02d", i)
		}
		ids := a.failures(tn.org, wf.ID, nips...)
		outage := a.failures(tn.org, wf.ID, "down", "down")
		get := func(token, path string) resp {
			return do(t, http.DefaultClient, "GET", a.srv.URL+path, "", bearer(token))
		}
		post := func(token, path, body, key string) resp {
			h := bearer(token)
			h["Content-Type"] = "application/json"
			if key != "" {
				h["Idempotency-Key"] = key
			}
			return do(t, http.DefaultClient, "POST", a.srv.URL+path, body, h)
		}
		accToken, _, err := a.as.CreateToken(ctx, tn.org, models.RoleAccountant, "księgowa")
		if err != nil {
			t.Fatal(err)
		}

		// Every item carries its group; the NIP problem is one group, the outage another.
		item := get(tn.token, "/api/v1/dlq/"+ids[0]).json(t)
		groupID, _ := item["groupId"].(string)
		outItem := get(tn.token, "/api/v1/dlq/"+outage[0]).json(t)
		if groupID == "" || outItem["groupId"] == groupID || outItem["groupId"] == nil {
			t.Fatalf("groups of the NIP item %v and the outage's %v", item["groupId"], outItem["groupId"])
		}
		r := get(tn.viewerToken, "/api/v1/dlq/groups?errorType=validation&workflowId="+wf.ID)
		list, _ := r.json(t)["items"].([]any)
		if r.status != 200 || len(list) != 1 {
			t.Fatalf("validation groups of the workflow: %d %s", r.status, r.body)
		}
		g := list[0].(map[string]any)
		counts := g["counts"].(map[string]any)
		if g["id"] != groupID || counts["pending"] != float64(n) || g["stepId"] != "send" || g["state"] != "open" ||
			g["title"] != "NIP „…” ma … cyfr, a powinien mieć … (400 Bad Request)" || len(g["subjects"].([]any)) != 10 {
			t.Fatalf("group %v", g)
		}
		if r := get(tn.token, "/api/v1/dlq/groups?q=powinien"); len(r.json(t)["items"].([]any)) != 1 {
			t.Errorf("search by title: %s", r.body)
		}
		for _, bad := range []string{"status=cosmic", "errorType=cosmic", "workflowId=x", "cursor=zzz"} {
			if r := get(tn.token, "/api/v1/dlq/groups?"+bad); r.status != 422 {
				t.Errorf("groups?%s: %d", bad, r.status)
			}
		}
		// Its items by groupId, a page at a time, nothing of another group.
		seen := 0
		for path := "/api/v1/dlq?groupId=" + groupID; ; {
			page := get(tn.token, path).json(t)
			for _, it := range page["items"].([]any) {
				if it.(map[string]any)["groupId"] != groupID {
					t.Fatalf("an item of another group in the group's list: %v", it)
				}
				seen++
			}
			next, _ := page["next"].(string)
			if next == "" {
				break
			}
			path = "/api/v1/dlq?groupId=" + groupID + "&cursor=" + next
		}
		if seen != n {
			t.Fatalf("the group's list has %d items, want %d", seen, n)
		}
		if r := get(tn.token, "/api/v1/dlq?groupId=nope"); r.status != 422 || fieldsOf(t, r)["groupId"] == nil {
			t.Errorf("groupId=nope: %d %s", r.status, r.body)
		}

		// Tenancy and roles.
		for _, c := range []struct {
			name, token, method, path, body string
			status                          int
			field                           string
		}{
			{"another organization reads", other.token, "GET", "/api/v1/dlq/groups/" + groupID, "", 404, ""},
			{"another organization acts", other.token, "POST", "/api/v1/dlq/groups/" + groupID + "/actions", `{"action": "retry"}`, 404, ""},
			{"another organization splits", other.token, "POST", "/api/v1/dlq/" + ids[1] + "/split", "", 404, ""},
			{"not an id", tn.token, "GET", "/api/v1/dlq/groups/x", "", 404, ""},
			{"viewer reads", tn.viewerToken, "GET", "/api/v1/dlq/groups/" + groupID, "", 200, ""},
			{"viewer acts", tn.viewerToken, "POST", "/api/v1/dlq/groups/" + groupID + "/actions", `{"action": "retry"}`, 403, ""},
			{"viewer splits", tn.viewerToken, "POST", "/api/v1/dlq/" + ids[1] + "/split", "", 403, ""},
			{"accountant resolves without a note", accToken, "POST", "/api/v1/dlq/groups/" + groupID + "/actions", `{"action": "resolve"}`, 422, "resolutionNotes"},
			{"unknown action", tn.token, "POST", "/api/v1/dlq/groups/" + groupID + "/actions", `{"action": "retry_modified"}`, 422, "action"},
			{"mute without a time", tn.token, "POST", "/api/v1/dlq/groups/" + groupID + "/actions", `{"action": "mute"}`, 422, "muteUntil"},
			{"mute in the past", tn.token, "POST", "/api/v1/dlq/groups/" + groupID + "/actions", `{"action": "mute", "muteUntil": "2020-01-01T00:00:00Z"}`, 422, "muteUntil"},
			{"mute not a time", tn.token, "POST", "/api/v1/dlq/groups/" + groupID + "/actions", `{"action": "mute", "muteUntil": "jutro"}`, 422, "muteUntil"},
			{"a time without a mute", tn.token, "POST", "/api/v1/dlq/groups/" + groupID + "/actions", `{"action": "retry", "muteUntil": "2030-01-01T00:00:00Z"}`, 422, "muteUntil"},
		} {
			var r resp
			if c.method == "GET" {
				r = get(c.token, c.path)
			} else {
				r = post(c.token, c.path, c.body, "")
			}
			if r.status != c.status || (c.field != "" && fieldsOf(t, r)[c.field] == nil) {
				t.Errorf("%s: %d %s", c.name, r.status, r.body)
			}
		}

		// Split: the item leaves for a group of its own; alone there, it cannot split again.
		r = post(accToken, "/api/v1/dlq/"+ids[0]+"/split", "", "")
		split := r.json(t)
		if r.status != 201 || split["id"] == groupID || split["splitFrom"] != groupID || split["counts"].(map[string]any)["pending"] != 1.0 {
			t.Fatalf("split: %d %s", r.status, r.body)
		}
		if r := post(accToken, "/api/v1/dlq/"+ids[0]+"/split", "", ""); r.status != 409 {
			t.Errorf("split an item alone in its group: %d %s", r.status, r.body)
		}
		n--

		// Mute: the group says so, and until when.
		until := time.Now().UTC().Add(time.Hour).Format(time.RFC3339)
		r = post(accToken, "/api/v1/dlq/groups/"+split["id"].(string)+"/actions", `{"action": "mute", "muteUntil": "`+until+`"}`, "")
		if m := r.json(t); r.status != 200 || m["state"] != "muted" || m["mutedUntil"] != until {
			t.Fatalf("mute: %d %s", r.status, r.body)
		}

		// One retry of the group: every pending item of it now, beyond a page; nothing else.
		on.Store(true)
		r = post(accToken, "/api/v1/dlq/groups/"+groupID+"/actions", `{"action": "retry"}`, "group-retry-1")
		job := r.json(t)
		if r.status != http.StatusAccepted || job["total"] != float64(n) || job["groupId"] != groupID || job["scope"] == "" {
			t.Fatalf("group retry: %d %s", r.status, r.body)
		}
		if again := post(accToken, "/api/v1/dlq/groups/"+groupID+"/actions", `{"action": "retry"}`, "group-retry-1"); again.status != 200 ||
			again.header.Get("Idempotency-Replayed") != "true" || again.json(t)["id"] != job["id"] {
			t.Errorf("the same key again: %d %s", again.status, again.body)
		}
		// A failure of the same cause after the action was asked for joins the group, not the job.
		late := a.failures(tn.org, wf.ID, "000000000")
		deadline := time.Now().Add(120 * time.Second)
		for {
			got := get(tn.token, "/api/v1/dlq/bulk/"+job["id"].(string)+"?limit=500").json(t)
			if got["status"] == models.BulkDone {
				if got["succeeded"] != float64(n) || len(got["items"].([]any)) != n {
					t.Fatalf("job %v", got)
				}
				for _, it := range got["items"].([]any) {
					if id := it.(map[string]any)["deadLetterId"]; id == late[0] || id == ids[0] || id == outage[0] || id == outage[1] {
						t.Fatalf("the job acted on %v, outside the group's pending items when asked", id)
					}
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job still %v", got["status"])
			}
			time.Sleep(200 * time.Millisecond)
		}
		for {
			g := get(tn.token, "/api/v1/dlq/groups/"+groupID).json(t)
			c := g["counts"].(map[string]any)
			if c["closed"] == float64(n) {
				if c["pending"] != 1.0 || c["processing"] != 0.0 || g["state"] != "open" {
					t.Fatalf("after the retry: %v", g)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("group counts %v", c)
			}
			time.Sleep(200 * time.Millisecond)
		}
		for _, id := range append(outage, ids[0]) {
			if s := get(tn.token, "/api/v1/dlq/"+id).json(t)["status"]; s != models.DLQPending {
				t.Errorf("item %s outside the group is %v", id, s)
			}
		}
		// The late item resolved by hand closes the group's last item: resolved.
		if r := post(tn.token, "/api/v1/dlq/groups/"+groupID+"/actions", `{"action": "resolve", "resolutionNotes": "NIP poprawiony"}`, ""); r.status != 202 || r.json(t)["total"] != 1.0 {
			t.Fatalf("resolve the rest: %d %s", r.status, r.body)
		}
		for {
			g := get(tn.token, "/api/v1/dlq/groups/"+groupID).json(t)
			if g["state"] == "resolved" && g["resolvedAt"] != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("group %v", g)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if r := post(tn.token, "/api/v1/dlq/groups/"+groupID+"/actions", `{"action": "retry"}`, ""); r.status != 422 || fieldsOf(t, r)["action"] == nil {
			t.Errorf("retry a group with nothing pending: %d %s", r.status, r.body)
		}
		if r := get(tn.token, "/api/v1/dlq/groups?status=resolved"); len(r.json(t)["items"].([]any)) != 1 {
			t.Errorf("resolved groups: %s", r.body)
		}
	})
}

// TestProblemsPage: the Problems page lists the groups with items to handle, the most
// first, each with its title, step, counts, clients and a sparkline; its one action goes
// through the DLQ list's bulk confirmation and counts exactly the group's pending items; a
// viewer sees no action; the DLQ list links to it.
func TestProblemsPage(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Problemy")
		svc, _ := nipService(t)
		ctx := context.Background()
		wf, err := a.wfs.Create(ctx, tn.org, actorSystem, fmt.Appendf(nil, `{"name": "VAT-7", "settings": {"subject": "{{ input.client }}", "retryPolicy": {"maxRetries": 0}},
		  "steps": [{"id": "send", "name": "Wyślij deklarację", "type": "http", "config": {"method": "POST", "url": "%s/send", "body": {"nip": "{{ input.nip }}"}}}]}`, svc.URL))
		if err != nil {
			t.Fatal(err)
		}
		a.failures(tn.org, wf.ID, "526104082", "701000213", "123456789", "down")
		browser, csrf := a.browser(tn)
		r := do(t, browser, "GET", a.srv.URL+"/dlq", "", nil)
		if r.status != 200 {
			t.Fatalf("problems: %d", r.status)
		}
		doc := parseListDoc(t, r.body)
		cards := doc.testID("problem")
		// The NIP problem (3), then the tenant's own failure and the outage (1 each).
		if len(cards) != 3 {
			t.Fatalf("%d problems, want 3", len(cards))
		}
		nip := cards[0]
		if got := nip.testID("problem-title")[0].text(); got != "NIP „…” ma … cyfr, a powinien mieć … (400 Bad Request)" {
			t.Errorf("title %q", got)
		}
		if got := nip.testID("problem-pending")[0].attr("data-count"); got != "3" {
			t.Errorf("pending %s", got)
		}
		if got := nip.testID("problem-step")[0].text(); got != "Wyślij deklarację" {
			t.Errorf("step %q", got)
		}
		if got := nip.testID("problem-subjects")[0].text(); !strings.Contains(got, "Klient 123456789, Klient 526104082, Klient 701000213") {
			t.Errorf("subjects %q", got)
		}
		if len(nip.testID("problem-spark")) != 1 || len(nip.testID("problem-item")) != 3 || nip.testID("problem-state")[0].text() != "Open" {
			t.Errorf("card %s", nip.text())
		}
		// A retry would repeat a validation error: correcting the data comes first, on the
		// group's page, and the retry is secondary.
		if fix := nip.testID("problem-fix"); len(fix) != 1 || listAttr(fix[0].root, "href") != listAttr(nip.testID("problem-open")[0].root, "href") ||
			strings.Contains(nip.testID("problem-retry")[0].attr("class"), "btn-primary") || len(nip.testID("problem-fix-hint")) != 1 {
			t.Errorf("a validation problem does not lead with fixing the data: %s", nip.text())
		}
		outages := 0
		for _, c := range cards {
			if strings.Contains(c.testID("problem-type")[0].text(), "Validation") {
				continue
			}
			outages++
			if len(c.testID("problem-fix")) != 0 || !strings.Contains(c.testID("problem-retry")[0].attr("class"), "btn-primary") {
				t.Errorf("the outage's problem does not lead with a retry: %s", c.text())
			}
		}
		if outages != 1 {
			t.Errorf("%d problems that are not validation errors, want the outage", outages)
		}
		groupID := nip.attr("data-id")
		// Its one action: the bulk confirmation, counting the group's pending items.
		form := url.Values{"_csrf": {csrf}, "scope": {"filter"}, "groupId": {groupID}, "action": {"retry"}}
		for _, in := range nip.testID("problem-action")[0].all(func(n *html.Node) bool { return n.Data == "input" }) {
			if name := listAttr(in, "name"); name != "_csrf" && form.Get(name) != listAttr(in, "value") {
				t.Errorf("the action's %s is %q", name, listAttr(in, "value"))
			}
		}
		r = do(t, browser, "POST", a.srv.URL+"/dlq/bulk", form.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		if r.status != 200 || !strings.Contains(r.body, `data-count="3"`) || strings.Count(r.body, `data-testid="bulk-confirm-item"`) != 3 {
			t.Errorf("confirmation of the group's retry: %d", r.status)
		}
		// The DLQ list links to it.
		if list := parseListDoc(t, do(t, browser, "GET", a.srv.URL+"/dlq/items", "", nil).body); len(list.testID("dlq-problems-link")) != 1 ||
			listAttr(list.testID("dlq-problems-link")[0].root, "href") != "/dlq" {
			t.Error("the DLQ list does not link to Problems")
		}
		// The group's page: the problem, its actions, its items as the list shows them.
		gp := do(t, browser, "GET", a.srv.URL+listAttr(nip.testID("problem-open")[0].root, "href"), "", nil)
		gd := parseListDoc(t, gp.body)
		if gp.status != 200 || len(gd.testID("group-title")) != 1 || len(gd.testID("dlq-row")) != 3 || len(gd.testID("group-retry")) != 1 ||
			len(gd.testID("group-mute")) != 1 {
			t.Errorf("group page: %d, %d rows", gp.status, len(gd.testID("dlq-row")))
		}
		// The group's edit through the API: the field must be in the items' input.
		api := func(body string) resp {
			h := bearer(tn.token)
			h["Content-Type"] = "application/json"
			return do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/dlq/groups/"+groupID+"/actions", body, h)
		}
		if r := api(`{"action": "edit_retry", "field": "nope", "value": "1"}`); r.status != 422 || !strings.Contains(r.body, `"field"`) {
			t.Errorf("edit of a field not in the input: %d %s", r.status, r.body)
		}
		if r := api(`{"action": "edit_retry", "field": "nip", "value": "5261040827"}`); r.status != 202 || !strings.Contains(r.body, `"total":3`) {
			t.Errorf("edit_retry: %d %s", r.status, r.body)
		}
		// Another organization's group is 404, on its page too.
		other := a.tenant("Biuro Obce")
		ob, _ := a.browser(other)
		if r := do(t, ob, "GET", a.srv.URL+"/dlq/groups/"+groupID, "", nil); r.status != 404 {
			t.Errorf("another organization's group page: %d", r.status)
		}
		// An item list's address from before keeps its filters: /dlq?… is the item list's.
		if r := do(t, browser, "GET", a.srv.URL+"/dlq?status=pending&q=Klient", "", nil); r.status != 303 || r.header.Get("Location") != "/dlq/items?status=pending&q=Klient" {
			t.Errorf("/dlq with the list's filters: %d %s", r.status, r.header.Get("Location"))
		}
		// A viewer reads, without the action.
		viewer := &tenant{email: "podglad@problemy.example", password: "correct horse battery"}
		if _, err := a.as.CreateUser(ctx, tn.org, viewer.email, viewer.password, models.RoleViewer); err != nil {
			t.Fatal(err)
		}
		vb, _ := a.browser(viewer)
		vd := parseListDoc(t, do(t, vb, "GET", a.srv.URL+"/dlq", "", nil).body)
		if len(vd.testID("problem")) != 3 || len(vd.testID("problem-action")) != 0 {
			t.Errorf("viewer: %d problems, %d actions", len(vd.testID("problem")), len(vd.testID("problem-action")))
		}
	})
}

// TestGroupPage: a group's page and its forms on both databases: the page names the
// problem and lists its items; the accountant's actions go through the bulk confirmation
// ("exactly N items of this group now"), a correction of a field shows the field and the
// value; mute until a preset and a date; the item's page names its group and splits the
// item out; a viewer sees no actions and may not mute; another organization's group is 404;
// bad input is 422: a mute without a time, a correction without a group, a secret field.
// A correction on a workflow that moves money is refused to an accountant, with the reason.
func TestGroupPage(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Strona Grupy")
		svc, _ := nipService(t)
		ctx := context.Background()
		mk := func(name string, money bool) string {
			wf, err := a.wfs.Create(ctx, tn.org, actorSystem, fmt.Appendf(nil, `{"name": %q, "settings": {"subject": "{{ input.client }}", "movesMoney": %t, "retryPolicy": {"maxRetries": 0}},
			  "steps": [{"id": "send", "name": "Wyślij", "type": "http", "config": {"method": "POST", "url": "%s/send", "body": {"nip": "{{ input.nip }}"}}}]}`, name, money, svc.URL))
			if err != nil {
				t.Fatal(err)
			}
			return wf.ID
		}
		wf, moneyWF := mk("VAT-7", false), mk("Przelewy", true)
		ids := a.failures(tn.org, wf, "526104082", "701000213")
		moneyIDs := a.failures(tn.org, moneyWF, "123456789")
		groupOf := func(dlID string) string {
			var dl models.DeadLetter
			if err := db.Conn(ctx).First(&dl, "id = ?", dlID).Error; err != nil || dl.GroupID == nil {
				t.Fatalf("group of %s: %v", dlID, err)
			}
			return *dl.GroupID
		}
		group, moneyGroup := groupOf(ids[0]), groupOf(moneyIDs[0])
		accountant := &tenant{email: "ksiegowa@grupa.example", password: "correct horse battery"}
		viewer := &tenant{email: "podglad@grupa.example", password: "correct horse battery"}
		for u, role := range map[*tenant]string{accountant: models.RoleAccountant, viewer: models.RoleViewer} {
			if _, err := a.as.CreateUser(ctx, tn.org, u.email, u.password, role); err != nil {
				t.Fatal(err)
			}
		}
		acc, accCSRF := a.browser(accountant)
		form := func(c *http.Client, path string, v url.Values) resp {
			return do(t, c, "POST", a.srv.URL+path, v.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		}

		page := do(t, acc, "GET", a.srv.URL+"/dlq/groups/"+group, "", nil)
		doc := parseListDoc(t, page.body)
		if page.status != 200 || len(doc.testID("group-title")) != 1 || len(doc.testID("dlq-row")) != 2 || len(doc.testID("group-actions")) != 1 {
			t.Fatalf("group page: %d, %d rows", page.status, len(doc.testID("dlq-row")))
		}
		// Retry all: the confirmation counts exactly the group's items now.
		r := form(acc, "/dlq/bulk", url.Values{"_csrf": {accCSRF}, "scope": {"filter"}, "groupId": {group}, "action": {"retry"}})
		if cd := parseListDoc(t, r.body); r.status != 200 || len(cd.testID("bulk-confirm-count")) != 1 ||
			cd.testID("bulk-confirm-count")[0].attr("data-count") != "2" || !strings.Contains(r.body, "exactly 2 items of this group") {
			t.Errorf("group retry confirmation: %d", r.status)
		}
		// A correction: the field and the new value, said before it starts.
		r = form(acc, "/dlq/bulk", url.Values{"_csrf": {accCSRF}, "scope": {"filter"}, "groupId": {group}, "action": {"edit_retry"},
			"field": {"nip"}, "value": {"5261040827"}})
		if cd := parseListDoc(t, r.body); r.status != 200 || len(cd.testID("bulk-confirm-edit")) != 1 ||
			!strings.Contains(cd.testID("bulk-confirm-edit")[0].text(), "5261040827") {
			t.Errorf("correction confirmation: %d", r.status)
		}
		// … and only of a group's items, and never of a secret field.
		if r := form(acc, "/dlq/bulk", url.Values{"_csrf": {accCSRF}, "scope": {"filter"}, "action": {"edit_retry"}, "field": {"nip"}, "value": {"1"}}); r.status != 422 {
			t.Errorf("correction without a group: %d", r.status)
		}
		if r := form(acc, "/dlq/bulk", url.Values{"_csrf": {accCSRF}, "scope": {"filter"}, "groupId": {group}, "action": {"edit_retry"}, "field": {"password"}, "value": {"x"}}); r.status != 422 ||
			!strings.Contains(r.body, "secret") {
			t.Errorf("correction of a secret field: %d", r.status)
		}
		// On a workflow that moves money the accountant's correction is refused, saying why.
		r = form(acc, "/dlq/bulk", url.Values{"_csrf": {accCSRF}, "scope": {"filter"}, "groupId": {moneyGroup}, "action": {"edit_retry"}, "field": {"nip"}, "value": {"1"}})
		token := ""
		for _, in := range parseListDoc(t, r.body).all(func(n *html.Node) bool { return n.Data == "input" && listAttr(n, "name") == "token" }) {
			token = listAttr(in, "value")
		}
		r = form(acc, "/dlq/bulk", url.Values{"_csrf": {accCSRF}, "scope": {"filter"}, "groupId": {moneyGroup}, "action": {"edit_retry"}, "field": {"nip"}, "value": {"1"},
			"confirm": {"1"}, "token": {token}})
		if r.status != 403 || !strings.Contains(r.body, "moves money") {
			t.Errorf("an accountant's correction on a money-moving workflow: %d", r.status)
		}
		// Mute: a preset, then a date and time; without a time, 422.
		until := time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
		if r := form(acc, "/dlq/groups/"+group+"/mute", url.Values{"_csrf": {accCSRF}, "until": {until}}); r.status != 303 {
			t.Errorf("mute: %d", r.status)
		}
		if g := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq/groups/"+group, "", bearer(tn.token)).json(t); g["state"] != "muted" {
			t.Errorf("after the mute the group is %v", g["state"])
		}
		at := time.Now().Add(48 * time.Hour).Format("2006-01-02T15:04")
		if r := form(acc, "/dlq/groups/"+group+"/mute", url.Values{"_csrf": {accCSRF}, "at": {at}}); r.status != 303 {
			t.Errorf("mute until a date: %d", r.status)
		}
		if r := form(acc, "/dlq/groups/"+group+"/mute", url.Values{"_csrf": {accCSRF}}); r.status != 422 {
			t.Errorf("mute without a time: %d", r.status)
		}
		// The item's page names its group; the accountant splits the item out.
		item := parseListDoc(t, do(t, acc, "GET", a.srv.URL+"/dlq/"+ids[1], "", nil).body)
		if len(item.testID("item-group-link")) != 1 || item.testID("item-group-link")[0].attr("href") != "/dlq/groups/"+group || len(item.testID("item-split")) != 1 {
			t.Fatal("the item's page does not name its group")
		}
		r = form(acc, "/dlq/"+ids[1]+"/split", url.Values{"_csrf": {accCSRF}})
		if loc := r.header.Get("Location"); r.status != 303 || !strings.HasPrefix(loc, "/dlq/groups/") || loc == "/dlq/groups/"+group {
			t.Errorf("split: %d %s", r.status, loc)
		}
		if groupOf(ids[1]) == group {
			t.Error("the item is still in its group")
		}
		// The organization keeps closing and correcting to admins: the accountant's page offers
		// retries only, and the bulk form refuses a group resolve.
		if r := do(t, http.DefaultClient, "PATCH", a.srv.URL+"/api/v1/organization/settings", `{"accountantsMayFix": false}`,
			map[string]string{"Authorization": "Bearer " + tn.token, "Content-Type": "application/json"}); r.status != 200 {
			t.Fatalf("rule: %d %s", r.status, r.body)
		}
		rd := parseListDoc(t, do(t, acc, "GET", a.srv.URL+"/dlq/groups/"+group, "", nil).body)
		if len(rd.testID("group-retry")) != 1 || len(rd.testID("group-resolve")) != 0 || len(rd.testID("group-edit")) != 0 {
			t.Error("with the rule off the accountant is offered closing or correcting")
		}
		r = form(acc, "/dlq/bulk", url.Values{"_csrf": {accCSRF}, "scope": {"filter"}, "groupId": {group}, "action": {"resolve"}, "notes": {"n"}})
		token = ""
		for _, in := range parseListDoc(t, r.body).all(func(n *html.Node) bool { return n.Data == "input" && listAttr(n, "name") == "token" }) {
			token = listAttr(in, "value")
		}
		if r := form(acc, "/dlq/bulk", url.Values{"_csrf": {accCSRF}, "scope": {"filter"}, "groupId": {group}, "action": {"resolve"}, "notes": {"n"},
			"confirm": {"1"}, "token": {token}}); r.status != 403 {
			t.Errorf("an accountant's group resolve with the rule off: %d", r.status)
		}
		// A viewer reads the page without actions and may not act.
		vb, vCSRF := a.browser(viewer)
		if vd := parseListDoc(t, do(t, vb, "GET", a.srv.URL+"/dlq/groups/"+group, "", nil).body); len(vd.testID("group-title")) != 1 || len(vd.testID("group-actions")) != 0 {
			t.Error("viewer: the page shows actions")
		}
		if r := form(vb, "/dlq/groups/"+group+"/mute", url.Values{"_csrf": {vCSRF}, "until": {until}}); r.status != 403 {
			t.Errorf("viewer mute: %d", r.status)
		}
		if r := form(vb, "/dlq/"+ids[0]+"/split", url.Values{"_csrf": {vCSRF}}); r.status != 403 {
			t.Errorf("viewer split: %d", r.status)
		}
		// Another organization: 404 on the page, the mute and the split.
		other := a.tenant("Biuro Obce Strony")
		ob, oCSRF := a.browser(other)
		for _, c := range []struct{ method, path string }{{"GET", "/dlq/groups/" + group}, {"POST", "/dlq/groups/" + group + "/mute"}, {"POST", "/dlq/" + ids[0] + "/split"}} {
			body := url.Values{"_csrf": {oCSRF}, "until": {until}}.Encode()
			if r := do(t, ob, c.method, a.srv.URL+c.path, body, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}); r.status != 404 {
				t.Errorf("another organization %s %s: %d", c.method, c.path, r.status)
			}
		}
	})
}

// TestRolledBackGroupLeadsWithFullRetry: a group whose pending items were all rolled back
// leads, on Problems and on its page, with "retry the whole workflow" (a retry from the
// failed step would be refused for every one) and offers no plain retry; once it also holds
// an item that was not rolled back, it offers both and says how many a plain retry would
// refuse, as the bulk confirmation counts them. Both databases.
func TestRolledBackGroupLeadsWithFullRetry(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		ctx := context.Background()
		rs := a.recoverySetup("Biuro Wycofań")
		var execs, items []string
		for _, client := range []string{"Kowalski", "Nowak", "Zając"} {
			ex, dl := a.failed(rs, client)
			execs, items = append(execs, ex), append(items, dl)
		}
		// Their rollbacks ran (the rollback's own tests cover how): the executions say so.
		if err := db.Conn(ctx).Model(&models.Execution{}).Where("id IN ?", execs).Update("rollback_status", models.RolledBack).Error; err != nil {
			t.Fatal(err)
		}
		var dl models.DeadLetter
		if err := db.Conn(ctx).First(&dl, "id = ?", items[0]).Error; err != nil || dl.GroupID == nil {
			t.Fatalf("no group: %v", err)
		}
		group := *dl.GroupID
		acc, accCSRF := a.browser(rs.accountant)
		card := func() listDoc {
			t.Helper()
			for _, p := range parseListDoc(t, do(t, acc, "GET", a.srv.URL+"/dlq", "", nil).body).testID("problem") {
				if p.attr("data-id") == group {
					return p
				}
			}
			t.Fatal("the group is not on Problems")
			return listDoc{}
		}
		c := card()
		if full := c.testID("problem-retry-full"); len(full) != 1 || len(c.testID("problem-retry")) != 0 || !strings.Contains(full[0].text(), "3 items") ||
			len(c.testID("problem-rolledback")) != 1 {
			t.Errorf("all rolled back: Problems does not lead with the whole workflow's retry: %q", c.text())
		}
		page := parseListDoc(t, do(t, acc, "GET", a.srv.URL+"/dlq/groups/"+group, "", nil).body)
		if full := page.testID("group-retry-full"); len(full) != 1 || len(page.testID("group-retry")) != 0 || !strings.Contains(listAttr(full[0].root, "class"), "btn-primary") {
			t.Error("all rolled back: the group's page does not lead with the whole workflow's retry")
		}
		// Its action asks for the whole workflow's retry of exactly the group's three, refusing none.
		form := url.Values{"scope": {"filter"}, "groupId": {group}, "action": {"retry_full"}}
		r := postForm(t, acc, accCSRF, a.srv.URL+"/dlq/bulk", form)
		if r.status != 200 || !strings.Contains(r.body, `data-testid="bulk-confirm"`) || strings.Contains(r.body, "rolled back") {
			t.Errorf("the whole workflow's retry's confirmation: %d", r.status)
		}

		// Mixed: one more item, not rolled back: both retries, and how many each refuses.
		a.failed(rs, "Wiśniewska")
		c = card()
		if len(c.testID("problem-retry")) != 1 || len(c.testID("problem-retry-full")) != 0 {
			t.Errorf("mixed: the card's action")
		}
		refusals := strings.Join(texts(c.testID("problem-refusals")), " | ")
		if !strings.Contains(refusals, "3 of them were rolled back") || !strings.Contains(refusals, "refuses none") {
			t.Errorf("mixed: refusals read %q", refusals)
		}
		page = parseListDoc(t, do(t, acc, "GET", a.srv.URL+"/dlq/groups/"+group, "", nil).body)
		if len(page.testID("group-retry")) != 1 || len(page.testID("group-retry-full")) != 1 || len(page.testID("problem-refusals")) != 2 {
			t.Error("mixed: the group's page does not offer both with the refusals")
		}
		// The plain retry's confirmation counts the same refusals.
		form.Set("action", "retry")
		if r := postForm(t, acc, accCSRF, a.srv.URL+"/dlq/bulk", form); r.status != 200 || !strings.Contains(r.body, "3 of them were rolled back") {
			t.Errorf("the plain retry's confirmation: %d", r.status)
		}
	})
}

// TestGroupPageRowsSplit: each pending item on a group's page offers accountants and admins
// "split out" with a confirmation; it moves the item to a group of its own (the existing
// split), whose page answers; the old group no longer lists it. Viewers get no such column,
// a closed item no button, and another organization's item is 404. Both databases.
func TestGroupPageRowsSplit(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		ctx := context.Background()
		rs := a.recoverySetup("Biuro Podziału")
		other := a.tenant("Biuro Obce Podziału")
		var items []string
		for _, client := range []string{"Kowalski", "Nowak", "Zając"} {
			_, dl := a.failed(rs, client)
			items = append(items, dl)
		}
		var dl models.DeadLetter
		if err := db.Conn(ctx).First(&dl, "id = ?", items[0]).Error; err != nil || dl.GroupID == nil {
			t.Fatalf("no group: %v", err)
		}
		group := *dl.GroupID
		// One of them closed: no split for it.
		if r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/dlq/"+items[2]+"/actions", `{"action": "resolve", "resolutionNotes": "Złożono ręcznie"}`, bearer(rs.token)); r.status != 200 {
			t.Fatalf("resolve: %d %s", r.status, r.body)
		}
		acc, accCSRF := a.browser(rs.accountant)
		rowsOf := func(c *http.Client, g string) map[string]listDoc {
			out := map[string]listDoc{}
			for _, r := range parseListDoc(t, do(t, c, "GET", a.srv.URL+"/dlq/groups/"+g, "", map[string]string{"Accept-Language": "pl"}).body).testID("dlq-row") {
				out[r.attr("data-id")] = r
			}
			return out
		}
		rows := rowsOf(acc, group)
		for _, id := range items[:2] {
			b := rows[id].testID("row-split-submit")
			if len(b) != 1 || b[0].text() != "Wydziel" || !strings.HasPrefix(b[0].attr("data-confirm"), "Wydzielić") ||
				rows[id].testID("row-split")[0].attr("action") != "/dlq/"+id+"/split" {
				t.Errorf("pending item %s: no split with a confirmation", id)
			}
		}
		if len(rows[items[2]].testID("row-split-submit")) != 0 {
			t.Error("a closed item offers a split")
		}
		viewer, _ := a.browser(rs.viewer)
		if v := parseListDoc(t, do(t, viewer, "GET", a.srv.URL+"/dlq/groups/"+group, "", nil).body); len(v.testID("row-split")) != 0 {
			t.Error("a viewer is offered a split")
		}
		oc, ocCSRF := a.browser(other)
		if r := postForm(t, oc, ocCSRF, a.srv.URL+"/dlq/"+items[0]+"/split", url.Values{}); r.status != http.StatusNotFound {
			t.Errorf("another organization splits: %d", r.status)
		}
		// The row's form: the item goes to a group of its own.
		r := postForm(t, acc, accCSRF, a.srv.URL+rows[items[0]].testID("row-split")[0].attr("action"), url.Values{})
		if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/dlq/groups/") || strings.HasSuffix(r.header.Get("Location"), group) {
			t.Fatalf("split: %d %s", r.status, r.header.Get("Location"))
		}
		newGroup := strings.TrimPrefix(r.header.Get("Location"), "/dlq/groups/")
		if _, ok := rowsOf(acc, group)[items[0]]; ok {
			t.Error("the old group still lists the split item")
		}
		if _, ok := rowsOf(acc, newGroup)[items[0]]; !ok {
			t.Error("the new group does not list the split item")
		}
	})
}
