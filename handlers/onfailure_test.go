package handlers_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// handledDef is a VAT workflow whose gateway refuses the NIP (422): the failure goes to the
// return_to_preparer handler, which opens a task; the execution ends PARTIAL.
func handledDef(url string) string {
	return fmt.Sprintf(`{"name": "VAT z obsługą błędów", "settings": {"retryPolicy": {"maxRetries": 0}, "subject": "{{ input.client }}",
	  "onFailure": {"byErrorType": {"validation": "return_to_preparer"}, "inputMapping": {"title": "Popraw NIP {{ input.nip }}"}}},
	  "steps": [
	    {"id": "submit", "name": "Wysyłka JPK", "type": "http", "config": {"method": "POST", "url": "%[1]s/vat", "body": {"nip": "{{ input.nip }}"}}},
	    {"id": "notify", "name": "Powiadomienie klienta", "type": "http", "config": {"method": "POST", "url": "%[1]s/ok"}},
	    {"id": "return_to_preparer", "name": "Zwrot do poprawy", "type": "http", "handler": true,
	     "config": {"method": "POST", "url": "%[1]s/task", "body": {"title": "{{ mapped.title }}", "reason": "{{ error.message }}"}}}]}`, url)
}

func TestOnFailureHandlerAPIAndPages(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Obsługi Błędów")
		svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			switch r.URL.Path {
			case "/vat":
				w.WriteHeader(http.StatusUnprocessableEntity)
				fmt.Fprint(w, `{"error": "NIP must have 10 digits"}`)
			case "/task":
				fmt.Fprint(w, `{"taskId": "ZAD-17"}`)
			default:
				fmt.Fprint(w, `{"ok": true}`)
			}
		}))
		defer svc.Close()

		// Save-time validation: 422 with a message per field.
		bad := strings.Replace(handledDef(svc.URL), `"handler": true,`, ``, 1)
		r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", bad, bearer(tn.token))
		if f := fieldsOf(t, r); r.status != 422 || !strings.Contains(fmt.Sprint(f["settings.onFailure.byErrorType.validation"]), `not marked "handler": true`) {
			t.Fatalf("unmarked handler: %d %s", r.status, r.body)
		}
		bad = strings.Replace(handledDef(svc.URL), `"validation": "return_to_preparer"`, `"flaky": "return_to_preparer"`, 1)
		if r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", bad, bearer(tn.token)); r.status != 422 ||
			!strings.Contains(r.body, "settings.onFailure.byErrorType.flaky") {
			t.Fatalf("unknown error type: %d %s", r.status, r.body)
		}

		r = do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", handledDef(svc.URL), bearer(tn.token))
		if r.status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		wfID := r.json(t)["id"].(string)
		r = do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wfID+"/executions", `{"input": {"nip": "123", "client": "Kwiaciarnia Róża"}}`, bearer(tn.token))
		exID := r.json(t)["id"].(string)
		var ex map[string]any
		for deadline := time.Now().Add(20 * time.Second); ; {
			ex = do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions/"+exID, "", bearer(tn.token)).json(t)
			if ex["status"] == models.ExecPartial || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if ex["status"] != models.ExecPartial || ex["dlqId"] != nil {
			t.Fatalf("execution %v", ex)
		}
		steps := map[string]map[string]any{}
		for _, s := range ex["steps"].([]any) {
			steps[s.(map[string]any)["id"].(string)] = s.(map[string]any)
		}
		h := steps["return_to_preparer"]
		if steps["submit"]["status"] != models.StepFailed || steps["submit"]["handledBy"] != "return_to_preparer" ||
			h["handler"] != true || h["handlerFor"] != "submit" || h["status"] != models.StepSucceeded || fmt.Sprint(h["serves"]) != "[submit notify]" {
			t.Errorf("steps %v", ex["steps"])
		}
		att := h["attempts"].([]any)[0].(map[string]any)
		if in := att["input"].(map[string]any); in["title"] != "Popraw NIP 123" {
			t.Errorf("handler input %v", in)
		}
		if out := att["output"].(map[string]any); out["taskId"] != "ZAD-17" {
			t.Errorf("handler output %v", out)
		}
		if steps["notify"]["status"] != models.StepNotRun || len(steps["notify"]["attempts"].([]any)) != 0 {
			t.Errorf("the step after the handled one: %v", steps["notify"])
		}

		// The execution page: the handled failure (not an alarm), the arrow to the handler,
		// the handler right after the step it handled, and the partial end.
		admin, _ := a.browser(tn)
		page := do(t, admin, "GET", a.srv.URL+"/executions/"+exID, "", nil).body
		doc := parseListDoc(t, page)
		if n := doc.testID("handled-failure"); len(n) != 1 || len(doc.testID("failure")) != 0 ||
			!strings.Contains(n[0].text(), "Zwrot do poprawy") || !strings.Contains(n[0].text(), "NIP must have 10 digits") {
			t.Errorf("handled failure banner: %s", page)
		}
		var order []string
		for _, s := range doc.testID("step") {
			order = append(order, s.attr("data-step-id"))
		}
		if strings.Join(order, ",") != "submit,return_to_preparer,notify" {
			t.Errorf("timeline order %v", order)
		}
		if n := doc.testID("handed-to"); len(n) != 1 || !strings.Contains(n[0].text(), "Zwrot do poprawy") {
			t.Error("no arrow from the failed step to its handler")
		}
		if len(doc.testID("handles")) != 1 || len(doc.testID("ended-partial")) != 1 || len(doc.testID("handler-tag")) != 1 {
			t.Error("the handler step does not say what it handled and how the execution ended")
		}
		// The executions list filters PARTIAL.
		list := do(t, admin, "GET", a.srv.URL+"/executions?"+url.Values{"status": {models.ExecPartial}}.Encode(), "", nil).body
		if !strings.Contains(list, exID) || strings.Contains(list, tn.execID) {
			t.Error("the PARTIAL filter does not list exactly the partial execution")
		}
		// The workflow page shows the handler beside the steps it serves.
		wf := parseListDoc(t, do(t, admin, "GET", a.srv.URL+"/workflows/"+wfID, "", nil).body)
		if n := wf.testID("on-failure"); len(n) != 2 || !strings.Contains(n[0].text(), "Zwrot do poprawy") {
			t.Errorf("on-failure routes: %d", len(n))
		}
		if n := wf.testID("handler-serves"); len(n) != 1 || !strings.Contains(n[0].text(), "Wysyłka JPK, Powiadomienie klienta") {
			t.Error("the handler does not list the steps it serves")
		}

		// A handler that names "next": the execution goes on there and succeeds, and the page
		// says where it went on.
		goesOn := fmt.Sprintf(`{"name": "VAT, dalej po obsłudze", "settings": {"retryPolicy": {"maxRetries": 0}},
		  "steps": [
		    {"id": "submit", "name": "Wysyłka JPK", "type": "http", "config": {"method": "POST", "url": "%[1]s/vat"},
		     "onFailure": {"handlerStepId": "return_to_preparer"}},
		    {"id": "notify", "name": "Powiadomienie klienta", "type": "http", "config": {"method": "POST", "url": "%[1]s/ok"}},
		    {"id": "return_to_preparer", "name": "Zwrot do poprawy", "type": "http", "handler": true, "next": "notify",
		     "config": {"method": "POST", "url": "%[1]s/task"}}]}`, svc.URL)
		r = do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", goesOn, bearer(tn.token))
		if r.status != http.StatusCreated {
			t.Fatalf("create the workflow that goes on: %d %s", r.status, r.body)
		}
		r = do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+r.json(t)["id"].(string)+"/executions", `{"input": {"nip": "123"}}`, bearer(tn.token))
		ex2 := r.json(t)["id"].(string)
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if st := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions/"+ex2, "", bearer(tn.token)).json(t)["status"]; st == models.ExecSucceeded {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("the execution that goes on: %v", st)
			}
		}
		doc = parseListDoc(t, do(t, admin, "GET", a.srv.URL+"/executions/"+ex2, "", nil).body)
		if n := doc.testID("went-on"); len(n) != 1 || !strings.Contains(n[0].text(), "Powiadomienie klienta") || len(doc.testID("ended-partial")) != 0 {
			t.Error("the handler does not say where the execution went on")
		}
	})
}
