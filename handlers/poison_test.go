package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestPoisonFlag: an invoice number that failed three times is flagged on its items through
// the API, in the reader's language; a value that failed once is not; another
// organization's item is 404.
func TestPoisonFlag(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Trucizn")
		other := a.tenant("Inne Biuro Trucizn")
		start := func(client, invoice string) string {
			r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+rs.wf+"/executions",
				fmt.Sprintf(`{"input": {"client": %q, "period": "2026-10", "nip": "526", "invoice": %q, "apiToken": "tok-s3cret-1"}}`, client, invoice), bearer(rs.token))
			if r.status != http.StatusCreated {
				t.Fatalf("start: %d %s", r.status, r.body)
			}
			exID := r.json(t)["id"].(string)
			for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				var dl models.DeadLetter
				if err := db.Conn(context.Background()).Where("execution_id = ?", exID).First(&dl).Error; err == nil {
					return dl.ID
				} else if time.Now().After(deadline) {
					t.Fatalf("execution %s has no dead letter", exID)
				}
			}
		}
		var ids []string
		for _, c := range []string{"Kowalski", "Nowak", "Wiśniewski"} {
			ids = append(ids, start(c, "FV/2026/10/77"))
		}
		once := start("Zielińska", "FV/2026/10/78")
		get := func(tok, id, lang string) resp {
			h := bearer(tok)
			h["Accept-Language"] = lang
			return do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq/"+id+"/poison", "", h)
		}
		r := get(rs.token, ids[1], "pl")
		flags, _ := r.json(t)["flags"].([]any)
		if r.status != 200 || len(flags) != 1 {
			t.Fatalf("flags: %d %s", r.status, r.body)
		}
		f := flags[0].(map[string]any)
		if f["kind"] != "invoice" || f["value"] != "FV/2026/10/77" || f["poison"] != true || f["failures"] != 3.0 || f["workflows"] != 1.0 ||
			f["text"] != "Ten dokument nie przeszedł 3 razy w 1 przepływie." {
			t.Errorf("flag %v", f)
		}
		if r := get(rs.token, ids[0], "en"); !strings.Contains(r.body, "This document has failed 3 times in 1 workflow.") {
			t.Errorf("English: %s", r.body)
		}
		r = get(rs.accountantToken, once, "pl")
		if flags, _ := r.json(t)["flags"].([]any); r.status != 200 || len(flags) != 1 || flags[0].(map[string]any)["poison"] != false ||
			flags[0].(map[string]any)["text"] != nil {
			t.Errorf("a value that failed once: %d %s", r.status, r.body)
		}
		if r := get(other.token, ids[0], "pl"); r.status != http.StatusNotFound {
			t.Errorf("another organization's item: %d", r.status)
		}

		// The item pages: a pending item carrying the invoice says it breaks runs; an item
		// whose replay went through with the same invoice does not (its run proved the value
		// works), while its pending siblings still do.
		acc, _ := a.browser(rs.accountant)
		flagged := func(id string) int {
			return len(parseListDoc(t, do(t, acc, "GET", a.srv.URL+"/dlq/"+id, "", nil).body).testID("poison-flag"))
		}
		if n := flagged(ids[2]); n != 1 {
			t.Fatalf("a pending item with the poison invoice: %d flags", n)
		}
		r = do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/dlq/"+ids[2]+"/actions",
			`{"action": "retry_modified", "modifiedInput": {"client": "Wiśniewski", "period": "2026-10", "nip": "5260001246", "invoice": "FV/2026/10/77", "apiToken": "tok-s3cret-1"}}`,
			map[string]string{"Authorization": "Bearer " + rs.token, "Content-Type": "application/json"})
		if r.status >= 300 {
			t.Fatalf("edited retry: %d %s", r.status, r.body)
		}
		for deadline := time.Now().Add(15 * time.Second); a.dlqStatus(rs.token, ids[2])["status"] != models.DLQResolved; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the edited retry did not resolve the item: %v", a.dlqStatus(rs.token, ids[2]))
			}
		}
		if n := flagged(ids[2]); n != 0 {
			t.Errorf("an item resolved by a successful replay says its invoice breaks runs: %d flags", n)
		}
		if n := flagged(ids[0]); n != 1 {
			t.Errorf("a pending sibling lost its flag: %d", n)
		}
	})
}
