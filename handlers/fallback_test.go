package handlers_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// fallbackWorkflow imports a statement from the bank's API (its breaker opens at the first
// failure and stays open) with a fallback that imports it from the e-mailed file, then posts it.
func fallbackWorkflow(url, fallback string) string {
	return fmt.Sprintf(`{"name": "Import wyciągu z zastępstwem", "settings": {"retryPolicy": {"maxRetries": 0},
	    "circuitBreaker": {"failureThreshold": 1, "resetTimeoutMs": 600000, "halfOpenRequests": 1}},
	  "steps": [
	    {"id": "import", "name": "Bank API", "type": "http", "fallbackStepId": %q, "config": {"method": "POST", "url": "%[2]s/bank"}},
	    {"id": "post", "name": "Księgowanie", "type": "http", "config": {"method": "POST", "url": "%[2]s/ledger", "body": {"id": "{{ steps.import.output.statementId }}"}}},
	    {"id": "from_file", "name": "Import z pliku", "type": "http", "handler": true, "circuitBreaker": {"enabled": false},
	     "config": {"method": "POST", "url": "%[2]s/file"}}]}`, fallback, url)
}

func TestFallbackAPIAndPage(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Zastępstw")
		var bankCalls atomic.Int64
		svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			switch r.URL.Path {
			case "/bank":
				bankCalls.Add(1)
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprint(w, `{"error": "maintenance"}`)
			case "/file":
				fmt.Fprint(w, `{"statementId": "PLIK-3"}`)
			default:
				fmt.Fprint(w, `{"ok": true}`)
			}
		}))
		defer svc.Close()

		// Save-time validation: 422 with the field path.
		for fallback, want := range map[string]string{"nope": `unknown step "nope"`, "post": `not marked "handler": true`, "import": "the step itself"} {
			r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", fallbackWorkflow(svc.URL, fallback), bearer(tn.token))
			if f := fieldsOf(t, r); r.status != 422 || !strings.Contains(fmt.Sprint(f["steps[0].fallbackStepId"]), want) {
				t.Fatalf("fallback %q: %d %s", fallback, r.status, r.body)
			}
		}
		noBreaker := strings.Replace(fallbackWorkflow(svc.URL, "from_file"), `"failureThreshold": 1,`, `"enabled": false, "failureThreshold": 1,`, 1)
		if r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", noBreaker, bearer(tn.token)); r.status != 422 ||
			!strings.Contains(fmt.Sprint(fieldsOf(t, r)["steps[0].fallbackStepId"]), "circuit breaker") {
			t.Fatalf("without a breaker: %d %s", r.status, r.body)
		}

		r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", fallbackWorkflow(svc.URL, "from_file"), bearer(tn.token))
		if r.status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		wfID := r.json(t)["id"].(string)
		run := func(want string) string {
			t.Helper()
			r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wfID+"/executions", `{"input": {}}`, bearer(tn.token))
			id := r.json(t)["id"].(string)
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				st := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions/"+id, "", bearer(tn.token)).json(t)["status"]
				if st == want {
					return id
				}
				if time.Now().After(deadline) {
					t.Fatalf("execution %s: %v, want %s", id, st, want)
				}
			}
		}
		run(models.ExecDLQPending) // the bank's failure opens the breaker
		calls := bankCalls.Load()
		exID := run(models.ExecSucceeded) // the fallback runs instead of the bank's API
		if n := bankCalls.Load(); n != calls {
			t.Fatalf("the bank's API was called %d times while its breaker was open", n-calls)
		}
		ex := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions/"+exID, "", bearer(tn.token)).json(t)
		steps := map[string]map[string]any{}
		for _, s := range ex["steps"].([]any) {
			steps[s.(map[string]any)["id"].(string)] = s.(map[string]any)
		}
		if steps["import"]["fellBackTo"] != "from_file" || steps["import"]["fallbackStepId"] != "from_file" || steps["from_file"]["standsInFor"] != "import" ||
			steps["import"]["handledBy"] != nil || steps["post"]["status"] != models.StepSucceeded {
			t.Errorf("steps %v", ex["steps"])
		}

		// The page says the fallback ran and why, in the step and in its attempt history,
		// with no failure banner; the fallback right after the step it replaced.
		admin, _ := a.browser(tn)
		page := do(t, admin, "GET", a.srv.URL+"/executions/"+exID, "", map[string]string{"Accept-Language": "pl"}).body
		doc := parseListDoc(t, page)
		want := "Usługa kroku „Bank API” niedostępna (bezpiecznik otwarty) — uruchomiono krok zastępczy „Import z pliku”"
		if n := doc.testID("fell-back"); len(n) != 1 || !strings.Contains(n[0].text(), want) {
			t.Errorf("no %q on the step: %s", want, page)
		}
		if n := doc.testID("attempt-fell-back"); len(n) != 1 || !strings.Contains(n[0].text(), want) {
			t.Error("the attempt history does not say the fallback ran")
		}
		if len(doc.testID("failure")) != 0 || len(doc.testID("handled-failure")) != 0 || len(doc.testID("attempt-error")) != 0 {
			t.Error("a fallback that ran is shown as a failure")
		}
		var order []string
		for _, s := range doc.testID("step") {
			order = append(order, s.attr("data-step-id"))
		}
		if strings.Join(order, ",") != "import,from_file,post" {
			t.Errorf("timeline order %v", order)
		}
		if n := doc.testID("stands-in"); len(n) != 1 || !strings.Contains(n[0].text(), "Bank API") || len(doc.testID("fallback-tag")) != 1 {
			t.Error("the fallback does not say which step it ran instead of")
		}
		if n := doc.testID("went-on"); len(n) != 1 || !strings.Contains(n[0].text(), "Księgowanie") {
			t.Error("the fallback does not say where the execution went on")
		}
		en := parseListDoc(t, do(t, admin, "GET", a.srv.URL+"/executions/"+exID, "", map[string]string{"Accept-Language": "en"}).body)
		if n := en.testID("fell-back"); len(n) != 1 || !strings.Contains(n[0].text(), "The service of step “Bank API” is unavailable (circuit breaker open) — ran the fallback step “Import z pliku” instead") {
			t.Error("the English page does not say the fallback ran")
		}
	})
}
