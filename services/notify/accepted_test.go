package notify_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/notify"
)

// TestWebhooksAcceptedWithAny2xx: a Slack receiver that answers 204 and a Teams Workflows
// webhook that answers 200 with a body the old connectors never sent have both taken the
// message; it is sent once, not retried.
func TestWebhooksAcceptedWithAny2xx(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newEnv(t, db)
		var posts atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			posts.Add(1)
			if r.URL.Path == "/slack" {
				w.WriteHeader(http.StatusNoContent)
				return
			}
			fmt.Fprint(w, `{"status": "queued"}`)
		}))
		defer srv.Close()
		e.settings(t, e.org.id, fmt.Sprintf(`{"channels": ["slack", "teams"], "slackWebhookUrl": %q, "teamsWebhookUrl": %q}`, srv.URL+"/slack", srv.URL+"/teams"))
		for _, ch := range []notify.Channel{notify.Slack, notify.Teams} {
			if err := e.svc.Test(context.Background(), e.org.id, e.org.admin.ID, ch); err != nil {
				t.Errorf("%s: %v", ch, err)
			}
		}
		if n := posts.Load(); n != 2 {
			t.Errorf("%d posts, want one per channel", n)
		}
	})
}
