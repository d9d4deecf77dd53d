package handlers_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/notify"
	"lifeline/views/i18n"
)

var _ notify.ServiceTexts = i18n.Catalog{}

// TestGroupTitleInReadersLanguage: a new failure group's notification gives the group's
// title in the reader's language on every channel, as the inbox does: by email in the
// recipient's own language, on Slack and Teams in the organization's; Lifeline's wrapper
// of the service's words ("400 Bad Request") is translated, the service's words kept. Both
// databases.
func TestGroupTitleInReadersLanguage(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ca := newCanaryApp(t, db, io.Discard)
		a, ctx := ca.app, context.Background()
		slack, slackSrv := newRecorder(t, 200)
		teams, teamsSrv := newRecorder(t, 202)
		rs := a.recoverySetup("Biuro Tytułów")
		settings := `{"enabled": true, "channels": ["email", "slack", "teams"], "recipients": ["role:admin"], "notifyOnDLQ": true,
		  "slackWebhookUrl": "` + slackSrv.URL + `/services/T0/B0/x", "teamsWebhookUrl": "` + teamsSrv.URL + `/workflows/run?sig=y"}`
		if r := do(t, http.DefaultClient, "PUT", a.srv.URL+"/api/v1/notifications/settings", settings, bearer(rs.token)); r.status != 200 {
			t.Fatalf("notification settings: %d %s", r.status, r.body)
		}
		setLang := func(lang string) {
			t.Helper()
			if err := db.Conn(ctx).Model(&models.Organization{}).Where("id = ?", rs.org).Update("default_language", lang).Error; err != nil {
				t.Fatal(err)
			}
			if err := db.Conn(ctx).Model(&models.User{}).Where("LOWER(email) = ?", strings.ToLower(rs.tenant.email)).Update("language", lang).Error; err != nil {
				t.Fatal(err)
			}
		}
		// each channel's group message: what was sent since from (emails, Slack, Teams).
		type sent struct{ email, slack, teams string }
		since := sent{}
		sentNow := func() sent {
			t.Helper()
			if _, err := ca.ns.Dispatch(ctx); err != nil {
				t.Fatal(err)
			}
			var mails []string
			for _, m := range ca.sink.Messages() {
				if r := m.Read(); strings.EqualFold(r.To, rs.tenant.email) {
					mails = append(mails, r.Subject+"\n"+r.Text)
				}
			}
			now := sent{strings.Join(mails, "\n"), slack.requests(), teams.requests()}
			out := sent{strings.TrimPrefix(now.email, since.email), strings.TrimPrefix(now.slack, since.slack), strings.TrimPrefix(now.teams, since.teams)}
			since = now
			return out
		}
		cases := []struct{ lang, want, not string }{{"pl", "400 Błędne żądanie", "400 Bad Request"}, {"en", "400 Bad Request", "400 Błędne żądanie"}}
		for i, c := range cases {
			setLang(c.lang)
			if i > 0 {
				rs.wf = a.moneyWorkflow(rs) // another workflow: a new group of the same reason
			}
			a.failed(rs, "Kowalski")
			got := sentNow()
			for ch, text := range map[string]string{"email": got.email, "slack": got.slack, "teams": got.teams} {
				if !strings.Contains(text, "NIP must have") || !strings.Contains(text, c.want) || strings.Contains(text, c.not) {
					t.Errorf("%s, %s: the group's title is not in the reader's language: %.600s", c.lang, ch, text)
				}
			}
		}
	})
}
