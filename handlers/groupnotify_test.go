package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/notify"
)

// TestNotifyPerSetting: the organization's settings page and API choose between notifying
// per failure group (the default) and per failure; anything else is a 422 with the field's
// message and nothing saved.
func TestNotifyPerSetting(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newNotifApp(t, db)
		nt := a.tenant("Biuro Grupy")
		ctx := context.Background()
		api := a.srv.URL + "/api/v1/notifications/settings"
		r := do(t, http.DefaultClient, "GET", api, "", bearer(nt.adminToken))
		if s := r.json(t); r.status != 200 || s["notifyPer"] != "group" {
			t.Fatalf("default: %d %s", r.status, r.body)
		}
		r = do(t, http.DefaultClient, "PUT", api, `{"notifyPer": "sometimes"}`, bearer(nt.adminToken))
		if f := fieldsOf(t, r); r.status != 422 || f["notifyPer"] == nil {
			t.Fatalf("a bad notifyPer: %d %s", r.status, r.body)
		}
		if row, _ := db.GetNotificationSettings(db.Conn(ctx), nt.org); row != nil {
			t.Fatalf("a refused body saved settings: %+v", row)
		}
		r = do(t, http.DefaultClient, "PUT", api, `{"notifyPer": "failure"}`, bearer(nt.adminToken))
		if s := r.json(t); r.status != 200 || s["notifyPer"] != "failure" {
			t.Fatalf("per failure: %d %s", r.status, r.body)
		}

		// The page: one radio per choice, the stored one checked; saved by its own name.
		c, csrf := a.browser(nt.admin)
		page := a.srv.URL + "/settings/notifications"
		doc := parseListDoc(t, do(t, c, "GET", page, "", nil).body)
		group, failure := doc.byID("notify-per-group"), doc.byID("notify-per-failure")
		if group == nil || failure == nil || hasAttr(group, "checked") || !hasAttr(failure, "checked") {
			t.Fatalf("the page's choice does not show the stored one")
		}
		form := url.Values{"_csrf": {csrf}, "enabled": {"true"}, "channels": {"email"}, "digestThresholdPerMinute": {"10"}}
		form.Set(doc.formKey(t, "notify-per-group"), "sometimes")
		r = do(t, c, "POST", page, form.Encode(), formHdr(nil))
		if r.status != http.StatusUnprocessableEntity || len(parseListDoc(t, r.body).testID("notify-per")) != 1 ||
			!strings.Contains(r.body, "group") {
			t.Fatalf("a bad choice on the page: %d", r.status)
		}
		if st, _ := a.ns.OrgSettings(ctx, nt.org); st.NotifyPer != notify.PerFailure {
			t.Fatalf("a refused form changed the setting: %q", st.NotifyPer)
		}
		form.Set(doc.formKey(t, "notify-per-group"), "group")
		if r := do(t, c, "POST", page, form.Encode(), formHdr(nil)); r.status != http.StatusSeeOther {
			t.Fatalf("save: %d %s", r.status, r.body)
		}
		if st, _ := a.ns.OrgSettings(ctx, nt.org); st.NotifyPer != notify.PerGroup {
			t.Fatalf("saved %q, want group", st.NotifyPer)
		}
	})
}

// TestGroupInboxAndFailuresPage: a failure group is one entry in the inbox that counts its
// executions in place ("now 25 executions", in the reader's language); a digest's page lists exactly the failures it
// stands for with their count, to members of its organization only.
func TestGroupInboxAndFailuresPage(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newNotifApp(t, db)
		nt := a.tenant("Biuro Problemy")
		other := a.tenant("Biuro Obce")
		ctx := context.Background()
		group := models.NewID()
		emit := func(ev notify.Event) {
			t.Helper()
			if err := db.Tx(ctx, func(tx *gorm.DB) error { return a.ns.Emit(tx, ev) }); err != nil {
				t.Fatal(err)
			}
		}
		for i := 1; i <= 25; i++ {
			emit(notify.Event{Kind: notify.DLQ, OrganizationID: nt.org, WorkflowID: nt.wf, WorkflowName: "Import wyciągów", ExecutionID: models.NewID(),
				StepID: "fetch", ErrorType: "validation", Reason: "NIP 526104082 ma 9 cyfr", DedupKey: models.NewID(),
				Group: &notify.GroupInfo{ID: group, Title: "NIP … ma … cyfr", Count: i, New: i == 1}})
			if i == 1 {
				if _, err := a.ns.Dispatch(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		c, _ := a.browser(nt.accountant)
		r := do(t, c, "GET", a.srv.URL+"/notifications", "", nil)
		items := parseListDoc(t, r.body).testID("notify-item")
		if r.status != 200 || len(items) != 1 || !strings.Contains(items[0].text(), "NIP … ma … cyfr") || !strings.Contains(items[0].text(), "now 25 executions") {
			t.Fatalf("the inbox: %d entries %v", len(items), func() []string {
				var s []string
				for _, it := range items {
					s = append(s, it.text())
				}
				return s
			}())
		}

		// A storm of one workflow notified per failure: its digest's page.
		if _, err := a.ns.SaveOrgSettings(ctx, nt.org, actorSystem, []byte(`{"notifyPer": "failure", "channels": ["email"], "recipients": ["szef@biuro.pl"], "digestThresholdPerMinute": 2}`)); err != nil {
			t.Fatal(err)
		}
		var execs []string
		for range 7 {
			ex := models.NewID()
			execs = append(execs, ex)
			emit(notify.Event{Kind: notify.DLQ, OrganizationID: nt.org, WorkflowID: nt.wf, ExecutionID: ex, StepID: "fetch", ErrorType: "validation",
				Reason: "NIP", DedupKey: models.NewID(), Group: &notify.GroupInfo{ID: models.NewID(), New: true, Count: 1}})
		}
		var dg models.NotificationDelivery
		if err := db.Conn(ctx).Where("organization_id = ? AND event_kind = ?", nt.org, "digest").First(&dg).Error; err != nil {
			t.Fatal(err)
		}
		r = do(t, c, "GET", a.srv.URL+"/notifications/"+dg.ID+"/failures", "", nil)
		d := parseListDoc(t, r.body)
		rows := d.testID("notify-failure")
		if r.status != 200 || len(rows) != 5 || !strings.Contains(d.testID("notify-failures-count")[0].text(), "5 executions") {
			t.Fatalf("the digest's page: %d, %d rows", r.status, len(rows))
		}
		for i, row := range rows {
			if !strings.Contains(r.body, "/executions/"+execs[2+i]) {
				t.Errorf("row %d does not link to %s: %s", i, execs[2+i], row.text())
			}
		}
		oc, _ := a.browser(other.admin)
		if r := do(t, oc, "GET", a.srv.URL+"/notifications/"+dg.ID+"/failures", "", nil); r.status != http.StatusNotFound {
			t.Errorf("another organization's digest: %d", r.status)
		}
		if r := do(t, c, "GET", a.srv.URL+"/notifications/nie-id/failures", "", nil); r.status != http.StatusNotFound && r.status != http.StatusUnprocessableEntity {
			t.Errorf("a bad id: %d", r.status)
		}
	})
}
