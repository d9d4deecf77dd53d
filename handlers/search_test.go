package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestSearchFoldsAndReadsInputs: the dead-letter and executions lists find what people type
// (issue 21), on both databases, in the API and on the pages alike: case and Polish
// diacritics ignored both ways ("kaminska" finds "Kamińska", "ŁÓDŹ" finds "Łódź"); the values
// of the input found (a NIP, an invoice number); a secret's value never, under its own key or
// copied into another.
func TestSearchFoldsAndReadsInputs(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Szukanie")
		start := func(input string) string {
			t.Helper()
			r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+rs.wf+"/executions", `{"input": `+input+`}`, bearer(rs.token))
			if r.status != http.StatusCreated {
				t.Fatalf("start: %d %s", r.status, r.body)
			}
			id := r.json(t)["id"].(string)
			for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				var dl models.DeadLetter
				if db.Conn(context.Background()).Where("execution_id = ?", id).First(&dl).Error == nil {
					return id
				}
				if time.Now().After(deadline) {
					t.Fatalf("execution %s has no dead letter", id)
				}
			}
		}
		kaminska := start(`{"client": "Kamińska Gabinet", "period": "2026-10", "nip": "526", "invoice": "FV/2026/10/0417",
		  "apiToken": "tajny-klucz-4711", "note": "kopia tajny-klucz-4711"}`)
		lodz := start(`{"client": "Hurtownia Łódź", "period": "2026-11", "nip": "701000213"}`)
		ids := func(path, q string) []string {
			t.Helper()
			r := do(t, http.DefaultClient, "GET", a.srv.URL+path+"?q="+url.QueryEscape(q), "", bearer(rs.token))
			if r.status != 200 {
				t.Fatalf("%s?q=%s: %d %s", path, q, r.status, r.body)
			}
			var out []string
			items, _ := r.json(t)["items"].([]any)
			for _, it := range items {
				m := it.(map[string]any)
				id, _ := m["executionId"].(string)
				if id == "" {
					id, _ = m["id"].(string)
				}
				out = append(out, id)
			}
			return out
		}
		for _, c := range []struct {
			q    string
			want []string
		}{
			{"kaminska", []string{kaminska}},
			{"KAMIŃSKA gab", []string{kaminska}},
			{"łódź", []string{lodz}},
			{"LODZ", []string{lodz}},
			{"701000213", []string{lodz}},           // the NIP, a value of the input
			{"FV/2026/10/0417", []string{kaminska}}, // an invoice number
			{"2026-1", []string{lodz, kaminska}},
			{"tajny-klucz", nil}, // a secret, under its key and copied into another: never
			{"4711", nil},
			{"Źdźbło", nil},
		} {
			for _, path := range []string{"/api/v1/dlq", "/api/v1/executions"} {
				if got := ids(path, c.q); fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Errorf("%s?q=%s: %v, want %v", path, c.q, got, c.want)
				}
			}
		}
		// The pages search the same way.
		b, _ := a.browser(rs.tenant)
		for _, path := range []string{"/dlq/items", "/executions"} {
			page := do(t, b, "GET", a.srv.URL+path+"?q=kaminska", "", nil).body
			if doc := parseListDoc(t, page); len(doc.testID(map[string]string{"/dlq/items": "dlq-row", "/executions": "execution-row"}[path])) != 1 {
				t.Errorf("%s?q=kaminska: not one row", path)
			}
		}
	})
}
