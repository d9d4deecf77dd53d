package handlers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/notify"
)

// TestWorkflowNotificationSettings: an admin sets one workflow's notifications on its own
// page (saved into its definition as a new version), keeps a stored webhook by sending it
// back masked, is told what is wrong next to the field, and goes back to the defaults.
func TestWorkflowNotificationSettings(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newNotifApp(t, db)
		nt := a.tenant("Biuro Przepływ")
		other := a.tenant("Biuro Cudze")
		hook := httptest.NewServer(http.NotFoundHandler())
		defer hook.Close()
		ctx := context.Background()
		wf, err := a.wfs.Create(ctx, nt.org, audit.System, []byte(`{"name": "Deklaracja VAT", "steps": [{"id": "t", "type": "transform", "config": {"output": 1}}]}`))
		if err != nil {
			t.Fatal(err)
		}
		page := a.srv.URL + "/workflows/" + wf.ID + "/notifications/edit"
		admin, csrf := a.browser(nt.admin)
		acc, accCSRF := a.browser(nt.accountant)
		if r := do(t, acc, "GET", page, "", nil); r.status != http.StatusForbidden {
			t.Errorf("accountant: %d", r.status)
		}
		if r := do(t, acc, "POST", page, url.Values{"_csrf": {accCSRF}}.Encode(), formHdr(nil)); r.status != http.StatusForbidden {
			t.Errorf("accountant's save: %d", r.status)
		}
		otherAdmin, _ := a.browser(other.admin)
		if r := do(t, otherAdmin, "GET", page, "", nil); r.status != http.StatusNotFound {
			t.Errorf("another organization: %d", r.status)
		}
		// The workflow card links admins here.
		if card := parseListDoc(t, do(t, admin, "GET", a.srv.URL+"/workflows/"+wf.ID+"/notifications", "", nil).body); len(card.testID("notify-card-edit")) != 1 ||
			card.testID("notify-card-edit")[0].attr("href") != "/workflows/"+wf.ID+"/notifications/edit" {
			t.Error("the workflow card does not link to its settings")
		}

		r := do(t, admin, "GET", page, "", nil)
		doc := parseListDoc(t, r.body)
		if r.status != 200 || !hasAttr(doc.testID("notify-usedefaults")[0].root, "checked") || len(doc.testID("notify-digest")) != 0 {
			t.Fatalf("form: %d, defaults checked, no digest threshold", r.status)
		}
		name := func(testID string) string { return doc.testID(testID)[0].attr("name") }
		form := func(v map[string][]string) string {
			out := url.Values{"_csrf": {csrf}}
			for k, vs := range v {
				out[name(k)] = vs
			}
			return out.Encode()
		}
		own := func() (int, map[string]any) {
			got, err := db.GetWorkflow(ctx, nt.org, wf.ID)
			if err != nil {
				t.Fatal(err)
			}
			var def struct {
				Settings struct {
					ErrorNotifications map[string]any `json:"errorNotifications"`
				} `json:"settings"`
			}
			if err := json.Unmarshal(got.Definition, &def); err != nil {
				t.Fatal(err)
			}
			return got.Version, def.Settings.ErrorNotifications
		}
		slack := hook.URL + "/slack/T1/B1/secret-token"
		r = do(t, admin, "POST", page, form(map[string][]string{"notify-enabled": {"true"}, "notify-channel-email": {"email", "slack"},
			"notify-recipients": {"role:admin\nbiuro@przeplyw.pl"}, "notify-slack": {slack}, "notify-notifyOnDLQ": {"true"}}), formHdr(nil))
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/workflows/"+wf.ID+"#notify-card" {
			t.Fatalf("save: %d %s %s", r.status, r.header.Get("Location"), r.body)
		}
		v, st := own()
		if v != 2 || st["slackWebhookUrl"] != slack || st["notifyOnDLQ"] != true || st["notifyOnFirstFailure"] != false ||
			strings.Join(anyStrings(st["channels"]), ",") != "email,slack" || strings.Join(anyStrings(st["recipients"]), ",") != "role:admin,biuro@przeplyw.pl" {
			t.Fatalf("saved v%d %v", v, st)
		}
		// Stored encrypted in the definition (a webhook's URL is its credential).
		var stored string
		if err := db.Conn(ctx).Raw("SELECT CAST(definition AS TEXT) FROM workflows WHERE id = ?", wf.ID).Scan(&stored).Error; err != nil ||
			strings.Contains(stored, "secret-token") || !strings.Contains(stored, "enc:") {
			t.Errorf("the webhook URL is stored in clear: %v", err)
		}
		// The stored webhook is shown masked; sent back as shown, it is kept.
		r = do(t, admin, "GET", page, "", nil)
		doc = parseListDoc(t, r.body)
		shown := doc.byID("notify-slack")
		if strings.Contains(r.body, "secret-token") || shown == nil || listAttr(shown, "value") == "" {
			t.Fatalf("the webhook is not shown masked")
		}
		r = do(t, admin, "POST", page, form(map[string][]string{"notify-enabled": {"true"}, "notify-channel-email": {"slack"},
			"notify-recipients": {"role:admin"}, "notify-slack": {listAttr(shown, "value")}}), formHdr(nil))
		if v, st = own(); r.status != http.StatusSeeOther || v != 3 || st["slackWebhookUrl"] != slack {
			t.Fatalf("masked webhook sent back: %d v%d %v", r.status, v, st)
		}
		// A private address is refused next to its field; nothing is saved.
		r = do(t, admin, "POST", page, form(map[string][]string{"notify-enabled": {"true"}, "notify-channel-email": {"slack"},
			"notify-slack": {"https://10.0.0.7/hook"}}), formHdr(map[string]string{"Accept-Language": "en"}))
		doc = parseListDoc(t, r.body)
		if v, _ = own(); r.status != http.StatusUnprocessableEntity || v != 3 || len(doc.testID("field-error")) == 0 ||
			!strings.Contains(r.body, "https://10.0.0.7/hook") {
			t.Fatalf("private webhook: %d v%d", r.status, v)
		}
		// Back to the organization's defaults.
		r = do(t, admin, "POST", page, form(map[string][]string{"notify-usedefaults": {"true"}}), formHdr(nil))
		if v, st = own(); r.status != http.StatusSeeOther || v != 4 || st != nil {
			t.Fatalf("defaults: %d v%d %v", r.status, v, st)
		}
	})
}

func anyStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// TestWorkflowCardNotifyPer: the workflow's notification card says in words whether it
// notifies once per problem or on every failure (the organization's choice, or the
// workflow's own), to every role; the workflow's settings form edits it (a 422 for a bad
// value, nothing saved), and the notifications follow it. Both databases.
func TestWorkflowCardNotifyPer(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newNotifApp(t, db)
		nt := a.tenant("Biuro Karta")
		ctx := context.Background()
		wf, err := a.wfs.Create(ctx, nt.org, audit.System, []byte(`{"name": "Deklaracja VAT", "steps": [{"id": "t", "type": "transform", "config": {"output": 1}}]}`))
		if err != nil {
			t.Fatal(err)
		}
		admin, csrf := a.browser(nt.admin)
		acc, _ := a.browser(nt.accountant)
		card := func(c *http.Client, lang string) listDoc {
			t.Helper()
			r := do(t, c, "GET", a.srv.URL+"/workflows/"+wf.ID+"/notifications", "", map[string]string{"Accept-Language": lang})
			per := parseListDoc(t, r.body).testID("notify-card-per")
			if r.status != 200 || len(per) != 1 {
				t.Fatalf("card: %d, %d notifyPer facts", r.status, len(per))
			}
			return per[0]
		}
		if per := card(acc, "pl"); per.attr("data-value") != "group" || per.text() != "raz na problem" {
			t.Errorf("the default reads %q (%s)", per.text(), per.attr("data-value"))
		}
		// The organization's choice shows on the card.
		if _, err := a.ns.SaveOrgSettings(ctx, nt.org, actorSystem, []byte(`{"notifyPer": "failure"}`)); err != nil {
			t.Fatal(err)
		}
		if per := card(acc, "pl"); per.text() != "o każdej awarii" {
			t.Errorf("the organization's per failure reads %q", per.text())
		}
		if per := card(acc, "en"); per.text() != "on every failure" {
			t.Errorf("in English it reads %q", per.text())
		}
		// The workflow's own, from its settings form.
		page := a.srv.URL + "/workflows/" + wf.ID + "/notifications/edit"
		doc := parseListDoc(t, do(t, admin, "GET", page, "", nil).body)
		if len(doc.testID("notify-per-group")) != 1 || !hasAttr(doc.testID("notify-per-failure")[0].root, "checked") {
			t.Fatal("the workflow's form has no notifyPer choice showing the one in effect")
		}
		form := url.Values{"_csrf": {csrf}, "enabled": {"true"}, "channels": {"email", "app"}, "recipients": {"role:admin"}, "notifyOnDLQ": {"true"}}
		form.Set(doc.formKey(t, "notify-per-group"), "sometimes")
		if r := do(t, admin, "POST", page, form.Encode(), formHdr(nil)); r.status != http.StatusUnprocessableEntity || len(parseListDoc(t, r.body).testID("notify-per")) != 1 {
			t.Errorf("a bad choice: %d", r.status)
		}
		if per := card(admin, "pl"); per.text() != "o każdej awarii" {
			t.Errorf("a refused form changed it: %q", per.text())
		}
		form.Set(doc.formKey(t, "notify-per-group"), "group")
		if r := do(t, admin, "POST", page, form.Encode(), formHdr(nil)); r.status != http.StatusSeeOther {
			t.Fatalf("save: %d %s", r.status, r.body)
		}
		if per := card(acc, "pl"); per.text() != "raz na problem" || per.attr("data-value") != "group" {
			t.Errorf("the workflow's own reads %q", per.text())
		}
		got, err := db.GetWorkflow(ctx, nt.org, wf.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st, err := a.ns.EffectiveSettings(ctx, nt.org, settingsOf(t, got.Definition)); err != nil || st.NotifyPer != notify.PerGroup {
			t.Errorf("in effect for the workflow: %q %v", st.NotifyPer, err)
		}
	})
}

// settingsOf is a definition's settings.errorNotifications.
func settingsOf(t *testing.T, def []byte) json.RawMessage {
	t.Helper()
	var d struct {
		Settings struct {
			ErrorNotifications json.RawMessage `json:"errorNotifications"`
		} `json:"settings"`
	}
	if err := json.Unmarshal(def, &d); err != nil {
		t.Fatal(err)
	}
	return d.Settings.ErrorNotifications
}
