package notify_test

import (
	"context"
	"fmt"
	"mime"
	"net/mail"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/notify"
)

// TestInterventionNotice: a request tells each holder by e-mail with their own single-use
// link (in their language), in the app with the plain link, and Slack and Teams with the
// plain link; the tokens are not in the event and are sealed in the deliveries.
func TestInterventionNotice(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newEnv(t, db)
		sl := newReceiver(t, 200)
		tm := newReceiver(t, 202)
		e.settings(t, e.org.id, fmt.Sprintf(`{"channels": ["email", "app", "slack", "teams"], "slackWebhookUrl": %q, "teamsWebhookUrl": %q}`,
			sl.URL+"/services/T1/B1/x", tm.URL+"/workflows/1"))
		id, exec := models.NewID(), models.NewID()
		n := notify.InterventionNotice{OrganizationID: e.org.id, InterventionID: id, ExecutionID: exec, Stage: notify.StageRequested,
			Kind: "approval", Title: "Zatwierdź VAT 2026-10", Message: "VAT do zapłaty: 61 000,00 zł", WorkflowName: "Deklaracja VAT",
			Subject: "Kowalski sp. z o.o.", ExpiresAt: e.clk.Now().Add(48 * time.Hour), At: e.clk.Now(),
			People: []notify.LinkedPerson{{UserID: e.org.admin.ID, Email: e.org.admin.Email, Token: "tok-admin"},
				{UserID: e.org.accountant.ID, Email: e.org.accountant.Email, Token: "tok-acc"}}}
		for range 2 { // the same notice twice: recorded once
			if err := db.Tx(context.Background(), func(tx *gorm.DB) error { return e.svc.EmitIntervention(tx, n) }); err != nil {
				t.Fatal(err)
			}
		}
		var ev models.NotificationEvent
		if err := db.Conn(context.Background()).Where("organization_id = ? AND kind = ?", e.org.id, "intervention").First(&ev).Error; err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(ev.Payload), "tok-") {
			t.Errorf("the event stores a link's token: %s", ev.Payload)
		}
		ds := e.deliveries(t)
		if len(ds) != 6 {
			t.Fatalf("deliveries: %d", len(ds))
		}
		for _, d := range ds {
			if d.SealedTarget != nil && strings.Contains(*d.SealedTarget, "tok-") {
				t.Errorf("a delivery stores a token in clear: %s", *d.SealedTarget)
			}
		}
		e.dispatch(t)
		link := "https://lifeline.example.pl/interventions/" + id
		byTo := map[string]string{}
		for _, m := range e.sink.Messages() {
			body := decodeQP(string(m.Data))
			if msg, err := mail.ReadMessage(strings.NewReader(string(m.Data))); err == nil {
				subj, _ := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
				body = "Subject: " + subj + "\n" + body
			}
			byTo[m.To[0]] = body
		}
		for who, wants := range map[string][]string{
			e.org.admin.Email:      {"Subject: Waiting for you: Zatwierdź VAT 2026-10", link + "?link=tok-admin", "61 000,00 zł"},
			e.org.accountant.Email: {"Subject: Czeka na Ciebie: Zatwierdź VAT 2026-10", link + "?link=tok-acc", "Kowalski sp. z o.o."},
		} {
			for _, w := range wants {
				if !strings.Contains(byTo[who], w) {
					t.Errorf("%s's e-mail lacks %q:\n%s", who, w, byTo[who])
				}
			}
		}
		if strings.Contains(byTo[e.org.admin.Email], "tok-acc") {
			t.Error("the admin's e-mail carries the accountant's link")
		}
		inbox, _, err := e.svc.Inbox(context.Background(), e.org.id, e.org.accountant.ID, 10)
		if err != nil || len(inbox) != 1 || !strings.HasSuffix(inbox[0].Link, "/interventions/"+id) {
			t.Fatalf("in-app: %+v %v", inbox, err)
		}
		for _, r := range []*receiver{sl, tm} {
			got := r.got()
			if len(got) != 1 || !strings.Contains(string(got[0]), "/interventions/"+id) || strings.Contains(string(got[0]), "tok-") {
				t.Errorf("webhook bodies: %s", got)
			}
		}
	})
}
