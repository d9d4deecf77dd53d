package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/retry"
)

// TestJSONFormRoundTrip: the item page's fields built from the data (static/js/forms.js)
// post the textarea's JSON as the script writes it (JSON.stringify(value, null, 2)). What
// they post keeps every type (a number, a boolean, null, a string of digits, a list) and a
// masked value sent back as shown keeps the stored secret: the replay's request carries the
// edited values and the real token. The page gives the script what it needs: the fields'
// kinds, the mask and the policy's limits (retry.Bounds), which the server enforces too.
func TestJSONFormRoundTrip(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Formularze")
		var mu sync.Mutex
		var got []map[string]any
		gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			raw, _ := io.ReadAll(r.Body)
			var body map[string]any
			_ = json.Unmarshal(raw, &body)
			mu.Lock()
			got = append(got, body)
			mu.Unlock()
			if nip, _ := body["nip"].(string); len(nip) != 10 {
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprint(w, `{"error": "NIP must have 10 digits"}`)
				return
			}
			fmt.Fprint(w, `{"filed": true}`)
		}))
		t.Cleanup(gw.Close)
		def := fmt.Sprintf(`{"name": "Faktura", "settings": {"subject": "{{ input.client }}", "retryPolicy": {"maxRetries": 0}},
		  "steps": [{"id": "file", "name": "Wyślij", "type": "http", "config": {"method": "POST", "url": "%s/f",
		    "body": {"nip": "{{ input.nip }}", "token": "{{ input.apiToken }}", "amount": "{{ input.amount }}", "paid": "{{ input.paid }}",
		      "note": "{{ input.note }}", "code": "{{ input.code }}", "tags": "{{ input.tags }}", "address": "{{ input.address }}"}}}]}`, gw.URL)
		wf, err := a.wfs.Create(context.Background(), tn.org, actorSystem, []byte(def))
		if err != nil {
			t.Fatal(err)
		}
		start := func(client string) string {
			t.Helper()
			in := fmt.Sprintf(`{"input": {"client": %q, "nip": "526", "apiToken": "tok-s3cret-1", "amount": 1200.5, "paid": false,
			  "note": null, "code": "0042", "tags": ["vat", "2026"], "address": {"city": "Łódź", "zip": "90-001"}}}`, client)
			r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wf.ID+"/executions", in, bearer(tn.token))
			if r.status != http.StatusCreated {
				t.Fatalf("start: %d %s", r.status, r.body)
			}
			exID := r.json(t)["id"].(string)
			for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				var dl models.DeadLetter
				if db.Conn(context.Background()).Where("execution_id = ?", exID).First(&dl).Error == nil {
					return dl.ID
				}
				if time.Now().After(deadline) {
					t.Fatalf("execution %s has no dead letter", exID)
				}
			}
		}
		dlID := start("Kowalski")
		admin, csrf := a.browser(tn)
		itemURL := a.srv.URL + "/dlq/" + dlID
		form := func(v url.Values) resp {
			v.Set("_csrf", csrf)
			return do(t, admin, "POST", itemURL+"/actions", v.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		}

		// The page: three textareas the script turns into fields, the mask, the texts.
		page := do(t, admin, "GET", itemURL, "", nil).body
		for _, want := range []string{`data-testid="edit-input" data-jsonform="object"`, `data-testid="skip-output" data-jsonform="object"`,
			`data-testid="policy-json" data-jsonform="policy"`, `data-masked="[REDACTED]"`, `id="jsonform-texts"`, `data-showjson="Show JSON"`,
			`src="/static/js/forms.js"`} {
			if !strings.Contains(page, want) {
				t.Errorf("item page lacks %s", want)
			}
		}
		if strings.Contains(page, "tok-s3cret-1") {
			t.Fatal("the page shows the secret")
		}
		// The policy's fields carry the limits the server enforces.
		m := regexp.MustCompile(`data-jsonform-schema="([^"]*)"`).FindStringSubmatch(page)
		if m == nil {
			t.Fatal("no policy schema")
		}
		var schema []struct {
			Key  string `json:"key"`
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &schema); err != nil {
			t.Fatalf("schema: %v", err)
		}
		kinds := map[string]string{}
		for _, f := range schema {
			kinds[f.Key] = f.Kind
		}
		for _, b := range retry.Bounds() {
			if kinds[b.Field] == "" {
				t.Errorf("the policy form has no field %s", b.Field)
			}
		}
		for _, k := range []string{"backoffType", "retryOnErrors", "noRetryOnErrors"} {
			if kinds[k] == "" {
				t.Errorf("the policy form has no field %s", k)
			}
		}

		// What the fields post after the NIP, the amount, "paid" and the list were changed,
		// the masked token left as shown, null left empty, the code of digits left a string.
		edited := `{
  "client": "Kowalski",
  "nip": "5260250274",
  "apiToken": "[REDACTED]",
  "amount": 1300,
  "paid": true,
  "note": null,
  "code": "0042",
  "tags": [
    "vat",
    "2026",
    "korekta"
  ],
  "address": {
    "city": "Łódź",
    "zip": "90-001"
  }
}`
		r := form(url.Values{"action": {"edit"}, "input": {edited}, "preview": {"1"}})
		if r.status != http.StatusOK {
			t.Fatalf("preview: %d", r.status)
		}
		diff := regexp.MustCompile(`data-testid="diff-line"><code>(.) ([a-zA-Z.]+)</code>`).FindAllStringSubmatch(r.body, -1)
		var paths []string
		for _, d := range diff {
			paths = append(paths, d[1]+d[2])
		}
		if strings.Join(paths, ",") != "~amount,~nip,~paid,~tags" {
			t.Errorf("diff %v, want amount, nip, paid and tags changed (not the masked token)", paths)
		}
		// The preview shows the fields again from what was posted.
		if !strings.Contains(r.body, `data-jsonform="object"`) || !strings.Contains(r.body, "korekta") {
			t.Error("the preview does not show the edited input again")
		}
		if r := form(url.Values{"action": {"edit"}, "input": {edited}}); r.status != http.StatusSeeOther {
			t.Fatalf("edit: %d %s", r.status, r.body)
		}
		if st := a.dlqStatus(tn.token, dlID); st["status"] != models.DLQResolved {
			t.Fatalf("after the edited retry: %v", st["status"])
		}
		mu.Lock()
		last := got[len(got)-1]
		mu.Unlock()
		want := map[string]any{"nip": "5260250274", "token": "tok-s3cret-1", "amount": 1300.0, "paid": true, "note": nil, "code": "0042",
			"tags": []any{"vat", "2026", "korekta"}, "address": map[string]any{"city": "Łódź", "zip": "90-001"}}
		for k, w := range want {
			if g, ok := last[k]; !ok || fmt.Sprintf("%#v", g) != fmt.Sprintf("%#v", w) {
				t.Errorf("the replay sent %s = %#v, want %#v", k, last[k], w)
			}
		}

		// A replaced secret is sent as typed.
		dl2 := start("Nowak")
		itemURL = a.srv.URL + "/dlq/" + dl2
		replaced := strings.Replace(edited, `"[REDACTED]"`, `"tok-nowy-2"`, 1)
		if r := form(url.Values{"action": {"edit"}, "input": {replaced}}); r.status != http.StatusSeeOther {
			t.Fatalf("edit with a replaced secret: %d", r.status)
		}
		if st := a.dlqStatus(tn.token, dl2); st["status"] != models.DLQResolved {
			t.Fatalf("after the retry with a replaced secret: %v", st["status"])
		}
		mu.Lock()
		last = got[len(got)-1]
		mu.Unlock()
		if last["token"] != "tok-nowy-2" {
			t.Errorf("the replaced secret: sent %v", last["token"])
		}

		// The policy's fields: what they post within the limits is taken; outside them, a 422
		// on the policy's field, nothing run.
		dl3 := start("Wiśniewski")
		itemURL = a.srv.URL + "/dlq/" + dl3
		r = form(url.Values{"action": {"retry"}, "retryPolicy": {"{\n  \"maxRetries\": 11\n}"}})
		if r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, "maxRetries: must be between 0 and 10") ||
			!regexp.MustCompile(`data-testid="policy-json"[^>]*aria-invalid="true"`).MatchString(r.body) {
			t.Errorf("policy out of bounds: %d", r.status)
		}
		if st := a.dlqStatus(tn.token, dl3); st["status"] != models.DLQPending {
			t.Errorf("a refused policy ran: %v", st["status"])
		}
		policy := `{
  "maxRetries": 1,
  "initialDelayMs": 1000,
  "backoffMultiplier": 1.5,
  "jitterRatio": 0,
  "backoffType": "fixed",
  "retryOnErrors": [
    "transient",
    "validation"
  ]
}`
		if r := form(url.Values{"action": {"retry"}, "retryPolicy": {policy}}); r.status != http.StatusSeeOther {
			t.Errorf("policy within bounds: %d %s", r.status, r.body)
		}
	})
}
