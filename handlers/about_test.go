package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestExecutionAbout: a workflow says what its executions are about (client, period, amount,
// obligation); a start renders them, counts the due date from the period (JPK_V7M for
// 2025-11 is due 29 December 2025: the 25th is Christmas, then 26th and a weekend), and the
// API carries them, the amount as an exact decimal string; an input whose amount or period is
// not of its kind is a 422 naming the input's field, and nothing is started; the workflow's
// settings are checked when it is saved.
func TestExecutionAbout(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		a := newApp(t, db)
		tn := a.tenant("Biuro Terminy")
		def := fmt.Sprintf(`{"name": "JPK_V7M", "settings": {"subject": "{{ input.client }} · {{ input.period }}", "client": "{{ input.nip }}",
		  "period": "{{ input.period }}", "amount": "{{ input.vat }}", "obligation": "JPK_V7M"},
		  "steps": [{"id": "file", "type": "http", "config": {"method": "POST", "url": "%s/ok", "body": {"nip": "{{ input.nip }}"}}}]}`, a.ext.URL)
		r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", def, bearer(tn.token))
		if r.status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		wfID := r.json(t)["id"].(string)
		start := func(input string) resp {
			return do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wfID+"/executions", `{"input": `+input+`}`, bearer(tn.token))
		}
		r = start(`{"client": "Piekarnia Kowalski", "nip": "5260250274", "period": "2025-11", "vat": "184 230,50"}`)
		if r.status != http.StatusCreated {
			t.Fatalf("start: %d %s", r.status, r.body)
		}
		id := r.json(t)["id"].(string)
		for _, u := range []string{"/api/v1/executions/" + id, "/api/v1/executions?workflowId=" + wfID} {
			r = do(t, http.DefaultClient, "GET", a.srv.URL+u, "", bearer(tn.token))
			ex := r.json(t)
			if items, ok := ex["items"].([]any); ok {
				ex = items[0].(map[string]any)
			}
			want := map[string]any{"client": "5260250274", "period": "2025-11", "obligation": "JPK_V7M", "dueAt": "2025-12-29", "amount": "184230.50", "currency": "PLN"}
			for k, v := range want {
				if ex[k] != v {
					t.Errorf("%s: %s = %v, want %v", u, k, ex[k], v)
				}
			}
		}

		var before int64
		db.Conn(ctx).Model(&models.Execution{}).Where("organization_id = ?", tn.org).Count(&before)
		for input, field := range map[string]string{
			`{"nip": "5260250274", "period": "2025-11", "vat": "dużo"}`: "input.vat",
			`{"nip": "5260250274", "period": "11/2025", "vat": "10"}`:   "input.period",
			`{"nip": "5260250274", "period": "2025-Q4", "vat": "10"}`:   "input.period", // JPK_V7M is monthly
		} {
			r := start(input)
			if r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, `"`+field+`"`) {
				t.Errorf("%s: %d %s, want 422 on %s", input, r.status, r.body, field)
			}
		}
		var after int64
		db.Conn(ctx).Model(&models.Execution{}).Where("organization_id = ?", tn.org).Count(&after)
		if after != before {
			t.Errorf("refused starts left %d executions", after-before)
		}
		// What the input lacks is not known: the start goes on.
		if r := start(`{"nip": "5260250274"}`); r.status != http.StatusCreated || r.json(t)["dueAt"] != nil {
			t.Errorf("no period: %d %s", r.status, r.body)
		}

		bad := strings.Replace(def, `"obligation": "JPK_V7M"`, `"obligation": "VAT-7"`, 1)
		if r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", bad, bearer(tn.token)); r.status != http.StatusUnprocessableEntity ||
			!strings.Contains(r.body, "settings.obligation") {
			t.Errorf("unknown obligation saved: %d %s", r.status, r.body)
		}
	})
}
