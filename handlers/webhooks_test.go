package handlers_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// The same signed delivery sent 6 times starts one execution: the first answer is 202, the
// other five 200 with the same executionId. The same webhook-id with another body is a 409;
// a new webhook-id starts a new execution.
func TestWebhookReplayStartsOneExecution(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Replay")
		u := a.srv.URL + "/hooks/" + tn.webhookToken
		body := []byte(`{"nip": "5260250274", "period": "2026-11"}`)
		h := signed(t, tn.webhookSecret, "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", time.Now(), body)
		before := count(t, db, "workflow_executions")
		var first string
		for i := range 6 {
			r := do(t, http.DefaultClient, "POST", u, string(body), h)
			want := http.StatusOK
			if i == 0 {
				want = http.StatusAccepted
			}
			if r.status != want {
				t.Fatalf("delivery %d: %d %s, want %d", i+1, r.status, r.body, want)
			}
			id, _ := r.json(t)["executionId"].(string)
			if i == 0 {
				first = id
			} else if id != first || r.json(t)["replayed"] != true {
				t.Fatalf("delivery %d answered execution %q (replayed %v), want %q", i+1, id, r.json(t)["replayed"], first)
			}
		}
		if n := count(t, db, "workflow_executions"); n != before+1 {
			t.Fatalf("6 deliveries of one webhook-id started %d executions, want 1", n-before)
		}
		// The delivery is remembered for at least 24 h (its timestamp alone stops a replay after 5 minutes,
		// but a sender retries a failed delivery later with the same webhook-id and a fresh signature).
		var key models.IdempotencyKey
		if err := db.Conn(context.Background()).Where("workflow_id = ? AND idem_key = ?", tn.wfID, "webhook:msg_2KWPBgLlAfxdpx2AI54pPJ85f4W").First(&key).Error; err != nil {
			t.Fatalf("no record of the delivery: %v", err)
		}
		if key.ExecutionID != first || key.ExpiresAt.Sub(key.CreatedAt) < 24*time.Hour {
			t.Fatalf("delivery record %+v: want execution %s kept ≥ 24 h", key, first)
		}
		// Same webhook-id, other body (correctly signed): a conflict, nothing started.
		other := []byte(`{"nip": "0000000000"}`)
		r := do(t, http.DefaultClient, "POST", u, string(other), signed(t, tn.webhookSecret, "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", time.Now(), other))
		if r.status != http.StatusConflict || !strings.Contains(r.body, "different body") {
			t.Fatalf("same id, other body: %d %s", r.status, r.body)
		}
		// A new webhook-id is a new delivery.
		r = do(t, http.DefaultClient, "POST", u, string(body), signed(t, tn.webhookSecret, "msg_other", time.Now(), body))
		if r.status != http.StatusAccepted || r.json(t)["executionId"] == first {
			t.Fatalf("new webhook-id: %d %s", r.status, r.body)
		}
		if n := count(t, db, "workflow_executions"); n != before+2 {
			t.Fatalf("%d executions, want %d", n-before, 2)
		}
		// Six concurrent deliveries of one event start one execution too.
		burst := signed(t, tn.webhookSecret, "msg_burst", time.Now(), body)
		ids := make(chan string, 6)
		var wg sync.WaitGroup
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// No t.Fatal off the test goroutine: failures become distinct answers.
				req, _ := http.NewRequest("POST", u, strings.NewReader(string(body)))
				for k, v := range burst {
					req.Header.Set(k, v)
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					ids <- err.Error()
					return
				}
				defer res.Body.Close()
				var out struct {
					ExecutionID string `json:"executionId"`
				}
				if err := json.NewDecoder(res.Body).Decode(&out); err != nil || (res.StatusCode != 200 && res.StatusCode != 202) {
					ids <- fmt.Sprintf("status %d (%v)", res.StatusCode, err)
					return
				}
				ids <- out.ExecutionID
			}()
		}
		wg.Wait()
		close(ids)
		seen := map[string]bool{}
		for id := range ids {
			seen[id] = true
		}
		if len(seen) != 1 || count(t, db, "workflow_executions") != before+3 {
			t.Fatalf("6 concurrent deliveries answered %v and started %d executions, want 1", seen, count(t, db, "workflow_executions")-before-2)
		}
		// The API cannot take over a webhook delivery's key.
		r = do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+tn.wfID+"/executions", `{"input": {}}`,
			map[string]string{"Authorization": "Bearer " + tn.token, "Idempotency-Key": "webhook:msg_next"})
		if r.status != 422 || !strings.Contains(r.body, "reserved") {
			t.Fatalf("API key with the webhook prefix: %d %s", r.status, r.body)
		}
		// A webhook-id that cannot be a key: 422, nothing started.
		long := strings.Repeat("m", 201)
		if r := do(t, http.DefaultClient, "POST", u, string(body), signed(t, tn.webhookSecret, long, time.Now(), body)); r.status != 422 {
			t.Fatalf("long webhook-id: %d %s", r.status, r.body)
		}
	})
}

// A timestamp more than 5 minutes from the server's clock is a 401 that says so, even
// with a valid signature; within the tolerance it is accepted.
func TestWebhookTimestampTolerance(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Clock")
		u := a.srv.URL + "/hooks/" + tn.webhookToken
		body := []byte(`{"nip": "1"}`)
		before := count(t, db, "workflow_executions")
		for _, off := range []time.Duration{-6 * time.Minute, 6 * time.Minute, -24 * time.Hour} {
			r := do(t, http.DefaultClient, "POST", u, string(body), signed(t, tn.webhookSecret, "msg_"+off.String(), time.Now().Add(off), body))
			if r.status != 401 || !strings.Contains(r.body, "more than 5 minutes") {
				t.Errorf("timestamp %v off: %d %s", off, r.status, r.body)
			}
		}
		if count(t, db, "workflow_executions") != before {
			t.Fatal("a stale webhook started an execution")
		}
		r := do(t, http.DefaultClient, "POST", u, string(body), signed(t, tn.webhookSecret, "msg_recent", time.Now().Add(-4*time.Minute), body))
		if r.status != 202 {
			t.Fatalf("4 minutes old: %d %s", r.status, r.body)
		}
	})
}

// New workflows get a whsec_ secret; admins read it in the API (viewers don't), and a
// request signed with it by the Standard Webhooks library itself is accepted. A workflow
// whose secret was stored in the old hex form keeps working: the API shows its whsec_ form,
// and signing with that form is accepted too.
func TestWebhookSecretForms(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Secret")
		if !strings.HasPrefix(tn.webhookSecret, "whsec_") {
			t.Fatalf("new workflow secret %q is not whsec_", tn.webhookSecret)
		}
		// A workflow created before the change: a 64-hex-character secret.
		legacy := hex.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
		other, err := a.wfs.Create(context.Background(), tn.org, actorSystem, []byte(a.definition("/ok")))
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Conn(context.Background()).Model(&models.Workflow{}).Where("id = ?", other.ID).Update("webhook_secret", legacy).Error; err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ id, token, stored string }{{tn.wfID, tn.webhookToken, tn.webhookSecret}, {other.ID, other.WebhookToken, legacy}} {
			r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/workflows/"+c.id, "", bearer(tn.token))
			shown, _ := r.json(t)["webhookSecret"].(string)
			if !strings.HasPrefix(shown, "whsec_") || (strings.HasPrefix(c.stored, "whsec_") && shown != c.stored) {
				t.Fatalf("admin sees secret %q (stored %q)", shown, c.stored)
			}
			if r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/workflows/"+c.id, "", bearer(tn.viewerToken)); strings.Contains(r.body, "whsec_") {
				t.Fatalf("a viewer sees the webhook secret: %s", r.body)
			}
			// Sign with the library, from what the admin was shown.
			wh, err := standardwebhooks.NewWebhook(shown)
			if err != nil {
				t.Fatal(err)
			}
			body := []byte(`{"nip": "2"}`)
			now := time.Now()
			sig, err := wh.Sign("msg_lib_"+c.id, now, body)
			if err != nil {
				t.Fatal(err)
			}
			h := map[string]string{"webhook-id": "msg_lib_" + c.id, "webhook-timestamp": strconv.FormatInt(now.Unix(), 10), "webhook-signature": sig}
			if r := do(t, http.DefaultClient, "POST", a.srv.URL+"/hooks/"+c.token, string(body), h); r.status != 202 {
				t.Fatalf("signed with the shown secret of %s: %d %s", c.id, r.status, r.body)
			}
		}
	})
}
