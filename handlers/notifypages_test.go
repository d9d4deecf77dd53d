package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/notify"
)

func formHdr(extra map[string]string) map[string]string {
	h := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	for k, v := range extra {
		h[k] = v
	}
	return h
}

// emitDLQ records a dead letter's notification for the tenant's execution and sends it.
func (a *notifApp) emitDLQ(t *testing.T, nt *notifTenant) {
	t.Helper()
	ev := notify.Event{Kind: notify.DLQ, OrganizationID: nt.org, WorkflowID: nt.wf, WorkflowName: "Deklaracja VAT", ExecutionID: nt.exec,
		StepID: "file", ErrorType: "validation", Reason: "nip: NIP must have 10 digits", DedupKey: models.NewID()}
	if err := a.db.Tx(context.Background(), func(tx *gorm.DB) error { return a.ns.Emit(tx, ev) }); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ns.Dispatch(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestNotificationSettingsPage: admins only (403 for the accountant and the viewer, on GET
// and POST); every field the form has is sent by its own name; a refusal is a 422 with a
// message next to each field and nothing saved; the webhook URL is shown masked and kept
// when sent back masked; each channel's test button reports success or the exact error;
// CSRF is required.
func TestNotificationSettingsPage(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newNotifApp(t, db)
		nt := a.tenant("Biuro Ustawienia")
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
		defer hook.Close()
		page := a.srv.URL + "/settings/notifications"

		for _, who := range []*tenant{nt.accountant, nt.viewer} {
			c, csrf := a.browser(who)
			if r := do(t, c, "GET", page, "", nil); r.status != http.StatusForbidden {
				t.Errorf("%s GET: %d", who.email, r.status)
			}
			if r := do(t, c, "POST", page, url.Values{"_csrf": {csrf}, "enabled": {"true"}}.Encode(), formHdr(nil)); r.status != http.StatusForbidden {
				t.Errorf("%s POST: %d", who.email, r.status)
			}
			if r := do(t, c, "POST", page+"/test", url.Values{"_csrf": {csrf}, "channel": {"email"}}.Encode(), formHdr(nil)); r.status != http.StatusForbidden {
				t.Errorf("%s test: %d", who.email, r.status)
			}
			// Their pages have no bell link to the admin pages, but they do have the bell.
			r := do(t, c, "GET", a.srv.URL+"/notifications", "", nil)
			if r.status != 200 || len(parseListDoc(t, r.body).testID("bell")) != 1 || strings.Contains(r.body, `data-testid="notify-settings-link"`) {
				t.Errorf("%s inbox: %d", who.email, r.status)
			}
		}

		c, csrf := a.browser(nt.admin)
		r := do(t, c, "GET", page, "", nil)
		if r.status != 200 {
			t.Fatalf("settings page: %d %s", r.status, r.body)
		}
		doc := parseListDoc(t, r.body)
		key := func(id string) string { return doc.formKey(t, id) }
		// The form's own names; the defaults are seed 000's.
		for id, want := range map[string]string{"notify-enabled": "checked", "notify-channel-email": "checked", "notify-channel-app": "checked",
			"notify-channel-slack": "", "notify-event-notifyOnDLQ": "checked", "notify-event-notifyOnFirstFailure": ""} {
			n := doc.byID(id)
			if n == nil {
				t.Fatalf("no #%s", id)
			}
			if hasAttr(n, "checked") != (want == "checked") {
				t.Errorf("#%s checked=%v, want %q", id, hasAttr(n, "checked"), want)
			}
		}

		// A refusal: every bad field has its message next to it, nothing is saved.
		bad := url.Values{"_csrf": {csrf}}
		bad.Set(key("notify-enabled"), "true")
		bad.Add(key("notify-channel-email"), "email")
		bad.Add(key("notify-channel-teams"), "teams")
		bad.Set(key("notify-recipients"), "role:admin\nnie-adres\nrole:szef")
		bad.Set(key("notify-slack"), "https://evil.example.com/hook")
		bad.Set(key("notify-teams"), "")
		bad.Set(key("notify-digest"), "dużo")
		r = do(t, c, "POST", page, bad.Encode(), formHdr(map[string]string{"HX-Request": "true"}))
		if r.status != http.StatusUnprocessableEntity {
			t.Fatalf("bad settings: %d %s", r.status, r.body)
		}
		d := parseListDoc(t, r.body)
		fieldMsg := func(inputID string) string {
			n := d.byID(inputID)
			if n == nil {
				t.Fatalf("422 lacks #%s", inputID)
			}
			for p := n.Parent; p != nil; p = p.Parent {
				if strings.Contains(listAttr(p, "class"), "field") {
					for _, e := range (listDoc{p}).testID("field-error") {
						return e.text()
					}
					return ""
				}
			}
			return ""
		}
		for id, want := range map[string]string{"notify-recipients": "nie-adres", "notify-slack": "hooks.slack.com", "notify-teams": "Teams",
			"notify-digest": "1 to 10000"} {
			if got := fieldMsg(id); !strings.Contains(got, want) {
				t.Errorf("422 message next to #%s = %q, want %q", id, got, want)
			}
		}
		if got := fieldMsg("notify-recipients"); !strings.Contains(got, "szef") {
			t.Errorf("the unknown role is not named: %q", got)
		}
		if d.byID("notify-recipients") == nil || !strings.Contains(d.text(), "nie-adres") {
			t.Errorf("the form lost what was typed")
		}
		if row, _ := db.GetNotificationSettings(db.Conn(context.Background()), nt.org); row != nil {
			t.Errorf("a refused form saved settings: %+v", row)
		}

		// Saved: back to the page with a confirmation; the webhook URL shown masked.
		secret := hook.URL + "/services/T1/B1/sekret-hook"
		good := url.Values{"_csrf": {csrf}}
		good.Set(key("notify-enabled"), "true")
		for _, ch := range []string{"email", "app", "slack"} {
			good.Add(key("notify-channel-"+ch), ch)
		}
		good.Set(key("notify-recipients"), "role:admin, biuro@example.pl")
		good.Set(key("notify-slack"), secret)
		good.Set(key("notify-teams"), "")
		good.Set(key("notify-event-notifyOnFirstFailure"), "true")
		good.Set(key("notify-event-notifyOnRetryExhausted"), "true")
		good.Set(key("notify-event-notifyOnDLQ"), "true")
		good.Set(key("notify-event-notifyOnBreakerOpen"), "true")
		good.Set(key("notify-digest"), "25")
		r = do(t, c, "POST", page, good.Encode(), formHdr(nil))
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/settings/notifications?done=saved" {
			t.Fatalf("save: %d %s %s", r.status, r.header.Get("Location"), r.body)
		}
		r = do(t, c, "GET", page+"?done=saved", "", nil)
		doc = parseListDoc(t, r.body)
		masked := listAttr(doc.byID("notify-slack"), "value")
		if len(doc.testID("notify-saved")) != 1 || strings.Contains(r.body, "sekret") || !strings.HasSuffix(masked, "/•••") {
			t.Errorf("saved page: slack %q, body has secret %v", masked, strings.Contains(r.body, "sekret"))
		}
		st, err := a.ns.OrgSettings(context.Background(), nt.org)
		if err != nil || st.SlackWebhookURL != secret || st.DigestThreshold != 25 || !st.NotifyOnBreakerOpen || !st.NotifyOnFirstFailure ||
			fmt.Sprint(st.Recipients) != "[role:admin biuro@example.pl]" || fmt.Sprint(st.Channels) != "[email app slack]" {
			t.Errorf("stored %+v %v", st, err)
		}
		// Sent back masked, the stored URL stays.
		good.Set(key("notify-slack"), masked)
		if r := do(t, c, "POST", page, good.Encode(), formHdr(map[string]string{"HX-Request": "true"})); r.status != 204 || r.header.Get("HX-Redirect") == "" {
			t.Errorf("htmx save: %d %v", r.status, r.header)
		}
		if st, _ := a.ns.OrgSettings(context.Background(), nt.org); st.SlackWebhookURL != secret {
			t.Errorf("the masked URL replaced the stored one: %q", st.SlackWebhookURL)
		}

		// One test button per channel, with the field name the button sends.
		for _, ch := range []string{"email", "app", "slack", "teams"} {
			btn := doc.testID("notify-test-" + ch)
			if len(btn) != 1 || btn[0].attr("name") != "channel" || btn[0].attr("value") != ch {
				t.Fatalf("test button %s", ch)
			}
		}
		test := func(ch string) listDoc {
			r := do(t, c, "POST", page+"/test", url.Values{"_csrf": {csrf}, "channel": {ch}}.Encode(), formHdr(map[string]string{"HX-Request": "true"}))
			if r.status != 200 {
				t.Fatalf("test %s: %d %s", ch, r.status, r.body)
			}
			return parseListDoc(t, r.body).testID("notify-test-result")[0]
		}
		for _, ch := range []string{"email", "app", "slack"} {
			if res := test(ch); res.attr("data-status") != "ok" {
				t.Errorf("test %s: %s", ch, res.text())
			}
		}
		if res := test("teams"); res.attr("data-status") != "failed" || !strings.Contains(res.text(), "webhook") {
			t.Errorf("test teams without a webhook: %q", res.text())
		}
		if n := len(a.sink.Messages()); n != 1 {
			t.Errorf("test emails: %d", n)
		}
		// A webhook that refuses: the exact error.
		refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no_service", http.StatusNotFound) }))
		defer refusing.Close()
		good.Set(key("notify-slack"), refusing.URL+"/services/x")
		if r := do(t, c, "POST", page, good.Encode(), formHdr(nil)); r.status != http.StatusSeeOther {
			t.Fatalf("save the refusing hook: %d %s", r.status, r.body)
		}
		if res := test("slack"); res.attr("data-status") != "failed" || !strings.Contains(res.text(), "404") {
			t.Errorf("test a refusing slack webhook: %q", res.text())
		}
		// Without htmx, the page with the result.
		r = do(t, c, "POST", page+"/test", url.Values{"_csrf": {csrf}, "channel": {"app"}}.Encode(), formHdr(nil))
		if res := parseListDoc(t, r.body).testID("notify-test-result"); r.status != 200 || len(res) != 4 || res[1].attr("data-status") != "ok" {
			t.Errorf("test without htmx: %d", r.status)
		}
		// CSRF.
		good.Del("_csrf")
		if r := do(t, c, "POST", page, good.Encode(), formHdr(nil)); r.status != http.StatusForbidden {
			t.Errorf("save without CSRF: %d", r.status)
		}
	})
}

func hasAttr(n *html.Node, name string) bool {
	for _, a := range n.Attr {
		if a.Key == name {
			return true
		}
	}
	return false
}

// TestNotificationLogAndInbox: the delivery log (admins) filtered by the names its form
// sends, with resend and pages; 404 across organizations; the in-app list with the bell,
// mark read and mark all read (CSRF); the workflow page's card.
func TestNotificationLogAndInbox(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newNotifApp(t, db)
		nt := a.tenant("Biuro Dziennik")
		other := a.tenant("Biuro Obce")
		a.emitDLQ(t, nt) // email and in-app to the admin and the accountant
		a.emitDLQ(t, other)
		c, csrf := a.browser(nt.admin)
		log := a.srv.URL + "/notifications/deliveries"

		acc, _ := a.browser(nt.accountant)
		if r := do(t, acc, "GET", log, "", nil); r.status != http.StatusForbidden {
			t.Errorf("accountant's log: %d", r.status)
		}
		r := do(t, c, "GET", log, "", nil)
		doc := parseListDoc(t, r.body)
		if r.status != 200 || len(doc.testID("delivery-row")) != 4 {
			t.Fatalf("log: %d rows %d", r.status, len(doc.testID("delivery-row")))
		}
		if strings.Contains(r.body, other.exec) || !strings.Contains(r.body, nt.admin.email) {
			t.Errorf("the log shows another organization's, or a user id for an in-app recipient")
		}
		q := func(kv ...string) string {
			v := url.Values{}
			for i := 0; i < len(kv); i += 2 {
				v.Set(doc.formKey(t, kv[i]), kv[i+1])
			}
			return log + "?" + v.Encode()
		}
		rows := func(u string) []listDoc {
			r := do(t, c, "GET", u, "", nil)
			if r.status != 200 {
				t.Fatalf("GET %s: %d %s", u, r.status, r.body)
			}
			return parseListDoc(t, r.body).testID("delivery-row")
		}
		if rs := rows(q("filter-notify-channel", "app")); len(rs) != 2 || rs[0].attr("data-channel") != "app" {
			t.Errorf("channel filter: %d", len(rs))
		}
		if rs := rows(q("filter-notify-status", "failed")); len(rs) != 0 {
			t.Errorf("status filter: %d", len(rs))
		}
		if rs := rows(q("filter-notify-execution", nt.exec, "filter-notify-channel", "email")); len(rs) != 2 {
			t.Errorf("execution filter: %d", len(rs))
		}
		if r := do(t, c, "GET", q("filter-notify-execution", other.exec), "", nil); r.status != http.StatusNotFound {
			t.Errorf("another organization's execution: %d", r.status)
		}
		if r := do(t, c, "GET", q("filter-notify-execution", "nie-uuid"), "", nil); r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, "UUID") {
			t.Errorf("a bad execution id: %d", r.status)
		}
		// Resend through the row's form, with the filter to come back to.
		rs := rows(q("filter-notify-channel", "email"))
		form := rs[0].testID("delivery-resend")
		if len(form) != 1 {
			t.Fatal("no resend button")
		}
		var action string
		for p := form[0].root.Parent; p != nil; p = p.Parent {
			if p.Data == "form" {
				action = listAttr(p, "action")
				break
			}
		}
		r = do(t, c, "POST", a.srv.URL+action, url.Values{"_csrf": {csrf}, "channel": {"email"}}.Encode(), formHdr(nil))
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/notifications/deliveries?channel=email&done=resent" {
			t.Errorf("resend: %d %s", r.status, r.header.Get("Location"))
		}
		if r := do(t, c, "POST", a.srv.URL+action, url.Values{"_csrf": {csrf}}.Encode(), formHdr(nil)); r.status != http.StatusConflict {
			t.Errorf("resend while pending: %d", r.status)
		}
		if r := do(t, c, "POST", a.srv.URL+action, url.Values{}.Encode(), formHdr(nil)); r.status != http.StatusForbidden {
			t.Errorf("resend without CSRF: %d", r.status)
		}
		oc, ocsrf := a.browser(other.admin)
		if r := do(t, oc, "POST", a.srv.URL+action, url.Values{"_csrf": {ocsrf}}.Encode(), formHdr(nil)); r.status != http.StatusNotFound {
			t.Errorf("another organization's resend: %d", r.status)
		}
		// Pages: 60 more deliveries, 50 a page, then the rest through the pager's link.
		now := time.Now().UTC()
		for i := 0; i < 60; i++ {
			d := models.NotificationDelivery{ID: models.NewID(), OrganizationID: nt.org, WorkflowID: nt.wf, ExecutionID: nt.exec, Channel: "email",
				Recipient: fmt.Sprintf("k%d@example.pl", i), EventKind: "dlq", Status: models.DeliverySent, NextAttemptAt: now, WindowStart: now,
				DedupKey: models.NewID(), CreatedAt: now.Add(-time.Duration(i) * time.Second), UpdatedAt: now}
			if err := db.Conn(context.Background()).Create(&d).Error; err != nil {
				t.Fatal(err)
			}
		}
		r = do(t, c, "GET", log, "", nil)
		doc = parseListDoc(t, r.body)
		more := doc.testID("load-more")
		if len(doc.testID("delivery-row")) != 50 || len(more) != 1 {
			t.Fatalf("first page: %d rows", len(doc.testID("delivery-row")))
		}
		seen := map[string]bool{}
		for _, id := range doc.rowIDs("delivery-row") {
			seen[id] = true
		}
		for _, id := range parseListDoc(t, do(t, c, "GET", a.srv.URL+more[0].attr("href"), "", nil).body).rowIDs("delivery-row") {
			if seen[id] {
				t.Errorf("delivery %s on both pages", id)
			}
			seen[id] = true
		}
		if len(seen) != 64 {
			t.Errorf("pages hold %d deliveries, want 64", len(seen))
		}

		// In-app: the bell counts, the list shows, mark read and mark all read.
		bell := func(c *http.Client) listDoc {
			r := do(t, c, "GET", a.srv.URL+"/notifications/bell", "", map[string]string{"HX-Request": "true"})
			b := parseListDoc(t, r.body).testID("bell")
			if r.status != 200 || len(b) != 1 {
				t.Fatalf("bell: %d %s", r.status, r.body)
			}
			return b[0]
		}
		a.emitDLQ(t, nt)
		if b := bell(c); b.attr("data-unread") != "2" || !strings.Contains(b.attr("aria-label"), "2") {
			t.Errorf("bell: %s %q", b.attr("data-unread"), b.attr("aria-label"))
		}
		r = do(t, c, "GET", a.srv.URL+"/notifications", "", nil)
		doc = parseListDoc(t, r.body)
		items := doc.testID("notify-item")
		// An unread notification's link reads it on the way to its execution.
		openURL := "/notifications/" + items[0].attr("data-id") + "/open?" + url.Values{"to": {"/executions/" + nt.exec}}.Encode()
		if len(items) != 2 || items[0].attr("data-unread") != "true" || len(items[0].testID("notify-link")) != 1 ||
			items[0].testID("notify-link")[0].attr("href") != openURL {
			t.Fatalf("inbox: %d items", len(items))
		}
		if top := doc.testID("bell"); len(top) != 1 || top[0].attr("data-unread") != "2" {
			t.Errorf("the top bar's bell")
		}
		// A failure reads as what happened, to which workflow and step, why; not as the
		// email's text.
		kind, facts, body := items[0].testID("notify-kind"), items[0].testID("notify-facts"), items[0].testID("notify-body")
		// (Without a subject the workflow is the title.)
		if len(kind) != 1 || kind[0].text() != "Dead-letter queue" || items[0].testID("notify-link")[0].text() != "Deklaracja VAT" ||
			len(facts) != 1 || !strings.Contains(facts[0].text(), "file") || len(facts[0].testID("error-type")) != 1 || facts[0].testID("error-type")[0].attr("data-error-type") != "validation" ||
			len(body) != 1 || body[0].text() != "nip: NIP must have 10 digits" {
			t.Errorf("the inbox item: %q", items[0].text())
		}
		// In the reader's language now, not the one it was sent in.
		if r := do(t, c, "POST", a.srv.URL+"/settings/language", url.Values{"_csrf": {csrf}, "lang": {"pl"}}.Encode(), formHdr(nil)); r.status >= 400 {
			t.Fatalf("language: %d", r.status)
		}
		pl := parseListDoc(t, do(t, c, "GET", a.srv.URL+"/notifications", "", nil).body).testID("notify-kind")
		if len(pl) == 0 || pl[0].text() != "Kolejka DLQ" {
			t.Errorf("the inbox in Polish: %v", pl)
		}

		if r := do(t, c, "POST", a.srv.URL+"/settings/language", url.Values{"_csrf": {csrf}, "lang": {"en"}}.Encode(), formHdr(nil)); r.status >= 400 {
			t.Fatalf("language: %d", r.status)
		}
		var readAction string
		for p := items[0].testID("notify-read")[0].root.Parent; p != nil; p = p.Parent {
			if p.Data == "form" {
				readAction = listAttr(p, "action")
				break
			}
		}
		// The viewer cannot mark the admin's; the admin can, via htmx (the bell is told).
		vc, vcsrf := a.browser(nt.viewer)
		if r := do(t, vc, "POST", a.srv.URL+readAction, url.Values{"_csrf": {vcsrf}}.Encode(), formHdr(nil)); r.status != http.StatusNotFound {
			t.Errorf("the viewer marked the admin's notification: %d", r.status)
		}
		if r := do(t, vc, "GET", a.srv.URL+openURL, "", nil); r.status != http.StatusNotFound {
			t.Errorf("the viewer opened the admin's notification: %d", r.status)
		}
		r = do(t, c, "POST", a.srv.URL+readAction, url.Values{"_csrf": {csrf}}.Encode(), formHdr(map[string]string{"HX-Request": "true"}))
		if r.status != 200 || r.header.Get("HX-Trigger") != "notifications-changed" || parseListDoc(t, r.body).testID("notify-inbox")[0].attr("data-unread") != "1" {
			t.Errorf("mark read: %d %s", r.status, r.header.Get("HX-Trigger"))
		}
		// Opening the other one reads it and goes to the execution; a destination that is
		// not an execution of this server goes to the list instead.
		second := "/notifications/" + items[1].attr("data-id") + "/open?"
		if r := do(t, c, "GET", a.srv.URL+second+url.Values{"to": {"https://evil.example/x"}}.Encode(), "", nil); r.status != http.StatusSeeOther || r.header.Get("Location") != "/notifications" {
			t.Errorf("open to another site: %d %s", r.status, r.header.Get("Location"))
		}
		if r := do(t, c, "GET", a.srv.URL+second+url.Values{"to": {"/executions/" + nt.exec}}.Encode(), "", nil); r.status != http.StatusSeeOther || r.header.Get("Location") != "/executions/"+nt.exec {
			t.Errorf("open: %d %s", r.status, r.header.Get("Location"))
		}
		if b := bell(c); b.attr("data-unread") != "0" {
			t.Errorf("bell after opening both: %s", b.attr("data-unread"))
		}
		readAll := doc.testID("notify-read-all")
		if len(readAll) != 1 {
			t.Fatal("no mark all read")
		}
		if r := do(t, c, "POST", a.srv.URL+"/notifications/read-all", url.Values{}.Encode(), formHdr(nil)); r.status != http.StatusForbidden {
			t.Errorf("read all without CSRF: %d", r.status)
		}
		r = do(t, c, "POST", a.srv.URL+"/notifications/read-all", url.Values{"_csrf": {csrf}}.Encode(), formHdr(nil))
		if r.status != http.StatusSeeOther {
			t.Errorf("read all: %d", r.status)
		}
		if b := bell(c); b.attr("data-unread") != "0" || len(b.testID("bell-count")) != 0 {
			t.Errorf("bell after read all: %s", b.attr("data-unread"))
		}
		if b := bell(acc); b.attr("data-unread") != "2" {
			t.Errorf("the accountant's bell changed with the admin's: %s", b.attr("data-unread"))
		}
		if r := do(t, c, "POST", a.srv.URL+"/settings/language", url.Values{"_csrf": {csrf}, "lang": {"pl"}}.Encode(), formHdr(nil)); r.status >= 400 {
			t.Fatalf("language: %d", r.status)
		}
		// A breaker on a host, read in Polish: named by the host, its reason in Polish too.
		ev := notify.Event{Kind: notify.BreakerOpened, OrganizationID: nt.org, WorkflowID: nt.wf, WorkflowName: "Deklaracja VAT", ExecutionID: nt.exec,
			StepName: "api.bank.pl", BreakerID: models.NewID(), ErrorType: "transient", Reason: "5 failures in 60 s", DedupKey: models.NewID(),
			Settings: json.RawMessage(`{"notifyOnBreakerOpen": true}`)}
		if err := a.db.Tx(context.Background(), func(tx *gorm.DB) error { return a.ns.Emit(tx, ev) }); err != nil {
			t.Fatal(err)
		}
		if _, err := a.ns.Dispatch(context.Background()); err != nil {
			t.Fatal(err)
		}
		first := parseListDoc(t, do(t, c, "GET", a.srv.URL+"/notifications", "", nil).body).testID("notify-item")[0]
		if l := first.testID("notify-link"); len(l) != 1 || l[0].text() != "Bezpiecznik dla api.bank.pl otworzył się" ||
			first.testID("notify-body")[0].text() != "liczba błędów: 5 w ciągu 60 s" {
			t.Errorf("the breaker's notification in Polish: %q", first.text())
		}
		if r := do(t, c, "POST", a.srv.URL+"/settings/language", url.Values{"_csrf": {csrf}, "lang": {"en"}}.Encode(), formHdr(nil)); r.status >= 400 {
			t.Fatalf("language: %d", r.status)
		}

		// The workflow card: the workflow's own keys over the organization's defaults.
		wf, err := db.GetWorkflow(context.Background(), nt.org, nt.wf)
		if err != nil {
			t.Fatal(err)
		}
		wf.Definition = models.JSON(`{"name": "Deklaracja VAT", "settings": {"errorNotifications": {"channels": ["email"], "recipients": ["vat@example.pl"]}}, "steps": []}`)
		if err := db.Conn(context.Background()).Save(wf).Error; err != nil {
			t.Fatal(err)
		}
		r = do(t, c, "GET", a.srv.URL+"/workflows/"+nt.wf+"/notifications", "", map[string]string{"HX-Request": "true"})
		doc = parseListDoc(t, r.body)
		if r.status != 200 || len(doc.testID("notify-card")) != 1 || doc.testID("notify-card-channels")[0].text() != "Email" ||
			doc.testID("notify-card-recipients")[0].text() != "vat@example.pl" || !strings.Contains(doc.text(), "dead-letter") ||
			len(doc.testID("notify-card-settings")) != 1 {
			t.Errorf("card: %d %s", r.status, r.body)
		}
		if r := do(t, oc, "GET", a.srv.URL+"/workflows/"+nt.wf+"/notifications", "", nil); r.status != http.StatusNotFound {
			t.Errorf("another organization's workflow card: %d", r.status)
		}
	})
}
