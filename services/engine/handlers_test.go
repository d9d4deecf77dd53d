package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/engine"
	"lifeline/services/workflows"
)

// taskDesk is a loopback accounting back office: /vat refuses the NIP (422), /bank is down
// (503), /refuse refuses everything (400), /task opens a task for the accountant (once per
// Idempotency-Key) and answers with its number; anything else succeeds.
type taskDesk struct {
	mu    sync.Mutex
	tasks map[string]json.RawMessage // body per Idempotency-Key
	keys  []string                   // Idempotency-Key of every /task request
	hang  chan struct{}              // when set, the first /task request waits on it
}

func newTaskDesk() *taskDesk { return &taskDesk{tasks: map[string]json.RawMessage{}} }

func (d *taskDesk) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/vat":
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprint(w, `{"error": "NIP must have 10 digits"}`)
	case "/bank":
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error": "maintenance"}`)
	case "/refuse":
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error": "the task queue is closed"}`)
	case "/task":
		body, _ := io.ReadAll(r.Body)
		key := r.Header.Get("Idempotency-Key")
		d.mu.Lock()
		d.keys = append(d.keys, key)
		first, hang := len(d.keys) == 1, d.hang
		d.mu.Unlock()
		if first && hang != nil {
			select { // the worker dies waiting for this answer
			case <-hang:
			case <-time.After(20 * time.Second):
			}
			return
		}
		d.mu.Lock()
		if _, done := d.tasks[key]; !done {
			d.tasks[key] = body
		}
		n := len(d.tasks)
		d.mu.Unlock()
		fmt.Fprintf(w, `{"taskId": "T-%d"}`, n)
	default:
		fmt.Fprint(w, `{"ok": true}`)
	}
}

func (d *taskDesk) snapshot() (keys []string, tasks map[string]json.RawMessage) {
	d.mu.Lock()
	defer d.mu.Unlock()
	tasks = make(map[string]json.RawMessage, len(d.tasks))
	for k, v := range d.tasks {
		tasks[k] = v
	}
	return append([]string(nil), d.keys...), tasks
}

// gatewayDef: prepare → file (the VAT gateway) → email, with a validation handler that opens a
// task from the mapped input, and a default handler that goes on at email.
func gatewayDef(url, settings, fileExtra string) string {
	return fmt.Sprintf(`{"name": "VAT %d", "settings": {"retryPolicy": {"maxRetries": 1, "initialDelayMs": 1000, "jitterRatio": 0}, "circuitBreaker": {"enabled": false}%s},
	  "steps": [
	    {"id": "prepare", "type": "http", "config": {"method": "POST", "url": "%[3]s/ok"}},
	    {"id": "file", "type": "http", "config": {"method": "POST", "url": "%[3]s%[4]s", "body": {"nip": "{{ input.nip }}", "apiKey": "k-secret-42"}}%[5]s},
	    {"id": "email", "type": "http", "config": {"method": "POST", "url": "%[3]s/ok"}},
	    {"id": "back_to_preparer", "type": "http", "handler": true,
	     "config": {"method": "POST", "url": "%[3]s/task", "body": {"title": "{{ mapped.title }}", "reason": "{{ error.message }}", "type": "{{ error.type }}", "code": "{{ error.code }}", "step": "{{ failedStep.id }}", "sentNip": "{{ failedStep.input.body.nip }}"}}},
	    {"id": "call_bank", "type": "http", "handler": true, "next": "email", "config": {"method": "POST", "url": "%[3]s/task", "body": {"title": "Bank down: {{ error.message }}"}}}
	  ]}`, time.Now().UnixNano(), settings, url, "%s", fileExtra)
}

func TestHandledFailures(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		h := newHarness(t, db)
		ctx := context.Background()
		desk := newTaskDesk()
		srv := httptest.NewServer(desk)
		defer srv.Close()
		byType := `, "onFailure": {"byErrorType": {"validation": "back_to_preparer"}, "default": "call_bank", "inputMapping": {"title": "Popraw NIP {{ input.nip }}", "reason": "{{ error.message }}"}}`

		t.Run("validation error to its handler, with the mapped input: PARTIAL", func(t *testing.T) {
			ex := h.start(h.workflow(fmt.Sprintf(gatewayDef(srv.URL, "", byType), "/vat")), `{"nip": "123"}`)
			got := h.wait(ex.ID, 20*time.Second)
			if got.Status != models.ExecPartial {
				t.Fatalf("status %s, want PARTIAL", got.Status)
			}
			as := h.attempts(ex.ID)
			steps := map[string]models.StepAttempt{}
			for _, a := range as {
				steps[a.StepID] = a
			}
			file, handler := steps["file"], steps["back_to_preparer"]
			if len(as) != 3 || file.Status != models.StepFailed || file.Attempt != 1 || handler.Status != models.StepSucceeded ||
				handler.HandlesAttemptID == nil || *handler.HandlesAttemptID != file.ID {
				t.Fatalf("attempts %+v", as)
			}
			if _, ran := steps["email"]; ran {
				t.Error("the step after the handled one ran, without a next")
			}
			// The handler's recorded input is the mapped input; its request read error and failedStep.
			in := h.openJSON(handler.Input)
			if in["title"] != "Popraw NIP 123" || !strings.Contains(fmt.Sprint(in["reason"]), "NIP must have 10 digits") {
				t.Errorf("handler input %v", in)
			}
			_, tasks := desk.snapshot()
			var task map[string]string
			if err := json.Unmarshal(tasks[engine.IdempotencyKey(ex.ID, "back_to_preparer", 1)], &task); err != nil {
				t.Fatalf("no task: %v %v", err, tasks)
			}
			if task["title"] != "Popraw NIP 123" || task["type"] != "validation" || task["code"] != "HTTP_422" || task["step"] != "file" ||
				task["sentNip"] != "123" || !strings.Contains(task["reason"], "NIP must have 10 digits") {
				t.Errorf("task %v", task)
			}
			out := h.openJSON(handler.Output)
			if out["taskId"] != "T-1" {
				t.Errorf("handler output %v", out)
			}
			var rec models.ExecutionError
			if err := db.Conn(ctx).First(&rec, "execution_id = ?", ex.ID).Error; err != nil || rec.Status != models.ErrResolved ||
				rec.ResolutionType == nil || *rec.ResolutionType != "handled" {
				t.Errorf("error record %+v %v", rec, err)
			}
			var n int64
			db.Conn(ctx).Model(&models.DeadLetter{}).Where("execution_id = ?", ex.ID).Count(&n)
			if n != 0 {
				t.Error("a handled failure went to the DLQ")
			}
			if acts := strings.Join(h.auditActions(), ","); !strings.Contains(acts, "error.recorded") || !strings.Contains(acts, "error.handled") {
				t.Errorf("audit %s", acts)
			}
		})

		t.Run("transient error exhausts its retries, then the default handler; next goes on", func(t *testing.T) {
			ex := h.start(h.workflow(fmt.Sprintf(gatewayDef(srv.URL, "", byType), "/bank")), `{"nip": "5260250274"}`)
			got := h.wait(ex.ID, 20*time.Second)
			if got.Status != models.ExecSucceeded {
				t.Fatalf("status %s, want SUCCEEDED", got.Status)
			}
			var seq []string
			for _, a := range h.attempts(ex.ID) {
				seq = append(seq, fmt.Sprintf("%s#%d:%s", a.StepID, a.Attempt, a.Status))
			}
			if want := "prepare#1:SUCCEEDED file#1:RETRYING file#2:FAILED email#1:SUCCEEDED call_bank#1:SUCCEEDED"; strings.Join(seq, " ") != want {
				t.Errorf("attempts %s, want %s", strings.Join(seq, " "), want)
			}
		})

		t.Run("a handler that fails for good: DLQ with both errors", func(t *testing.T) {
			def := strings.Replace(fmt.Sprintf(gatewayDef(srv.URL, "", byType), "/vat"), srv.URL+"/task", srv.URL+"/refuse", 1)
			ex := h.start(h.workflow(def), `{"nip": "123"}`)
			if got := h.wait(ex.ID, 20*time.Second); got.Status != models.ExecDLQPending {
				t.Fatalf("status %s, want DLQ_PENDING", got.Status)
			}
			dl := h.deadLetter(ex.ID)
			var states []engine.StepState
			if err := json.Unmarshal(dl.StepStates, &states); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range states {
				e := ""
				if s.Error != nil {
					e = s.Error.Type + " " + s.Error.Message
				}
				got = append(got, s.StepID+" "+s.Status+" "+e)
			}
			joined := strings.Join(got, " | ")
			if dl.FailedStepID != "back_to_preparer" || len(states) != 3 ||
				!strings.Contains(joined, "file FAILED validation NIP must have 10 digits") ||
				!strings.Contains(joined, "back_to_preparer DLQ validation the task queue is closed") {
				t.Errorf("dead letter %s: %s", dl.FailedStepID, joined)
			}
		})

		t.Run("workflow-wide handler; rollbackOnFailure does not roll back a handled failure", func(t *testing.T) {
			settings := `, "rollbackOnFailure": true, "onFailure": {"handlerStepId": "back_to_preparer", "inputMapping": {"title": "{{ failedStep.id }}"}}`
			def := strings.Replace(fmt.Sprintf(gatewayDef(srv.URL, settings, ""), "/vat"), `"url": "`+srv.URL+`/ok"}}`,
				`"url": "`+srv.URL+`/ok"}, "compensation": {"compensationType": "notification", "config": {"message": "undo"}}}`, 1)
			ex := h.start(h.workflow(def), `{"nip": "1"}`)
			got := h.wait(ex.ID, 20*time.Second)
			if got.Status != models.ExecPartial || got.RollbackStatus != nil {
				t.Fatalf("status %s, rollback %v", got.Status, got.RollbackStatus)
			}
			if cs := h.compensations(ex.ID); len(cs) != 0 {
				t.Errorf("a handled failure was rolled back: %+v", cs)
			}
		})
	})
}

// openJSON decodes a JSON column as an object (the test engine seals nothing).
func (h *harness) openJSON(v models.JSON) map[string]any {
	h.t.Helper()
	var out map[string]any
	if err := json.Unmarshal(v, &out); err != nil {
		h.t.Fatalf("%v (%s)", err, v)
	}
	return out
}

// TestHandlerCrash kills the engine process (SIGKILL) while a handler's request is in flight;
// another process runs the handler again with the same idempotency key, and the execution
// ends PARTIAL with the task opened once.
func TestHandlerCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts engine processes")
	}
	t.Parallel()
	for _, dialect := range modeltest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url, db := openDialect(t, dialect)
			clock := modeltest.Clock(t, db) // before the stack: River reads a SQLite database's clock when built
			desk := newTaskDesk()
			desk.hang = make(chan struct{})
			srv := httptest.NewServer(desk)
			t.Cleanup(srv.Close)
			t.Cleanup(func() { close(desk.hang) })
			eng, _, reg, err := newStack(db, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			org := models.Organization{ID: models.NewID(), Name: "Biuro Testowe"}
			if err := db.Conn(ctx).Create(&org).Error; err != nil {
				t.Fatal(err)
			}
			def := strings.Replace(fmt.Sprintf(gatewayDef(srv.URL, "", `, "onFailure": {"handlerStepId": "back_to_preparer"}`), "/vat"),
				`"handler": true,`, `"handler": true, "timeoutMs": 1500,`, 1)
			wf, err := (&workflows.Service{DB: db, Steps: reg}).Create(ctx, org.ID, audit.System, []byte(def))
			if err != nil {
				t.Fatal(err)
			}
			ex, _, err := eng.Start(ctx, engine.StartRequest{OrganizationID: org.ID, WorkflowID: wf.ID, Input: []byte(`{"nip": "1"}`)})
			if err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			first := startChild(t, url, "engine 1", clock)
			deadline := time.Now().Add(60 * time.Second)
			for keys, _ := desk.snapshot(); len(keys) == 0; keys, _ = desk.snapshot() {
				if time.Now().After(deadline) {
					t.Fatal("the handler never ran")
				}
				time.Sleep(5 * time.Millisecond)
			}
			t.Logf("handler in flight after %s", time.Since(began))
			first.kill(t)

			// The handler's lease (1.5 s and the grace) and the dead process's River leadership
			// pass, as the time a restart takes would.
			clock.Advance(afterKill)
			second := startChild(t, url, "engine 2", clock)
			deadline = time.Now().Add(60 * time.Second)
			var got models.Execution
			for {
				if err := db.Conn(ctx).First(&got, "id = ?", ex.ID).Error; err != nil {
					t.Fatal(err)
				}
				if got.Status == models.ExecPartial || got.Status == models.ExecDLQPending || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("ended after %s", time.Since(began))
			second.kill(t)
			if got.Status != models.ExecPartial {
				t.Fatalf("status %s after the kill, want PARTIAL", got.Status)
			}
			keys, tasks := desk.snapshot()
			want := engine.IdempotencyKey(ex.ID, "back_to_preparer", 1)
			if len(keys) != 2 || keys[0] != want || keys[1] != want || len(tasks) != 1 {
				t.Errorf("requests %v, tasks %d; want twice %s, one task", keys, len(tasks), want)
			}
		})
	}
}
