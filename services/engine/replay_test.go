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
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/engine"
	"lifeline/services/retry"
)

// nipService is a VAT gateway on loopback: 400 {"error": "NIP must have 10 digits"} unless
// the body's nip has 10 digits, and 503 while down is set. It records every call.
type nipService struct {
	mu    sync.Mutex
	down  bool
	calls []nipCall
	hold  chan struct{} // when set, answers wait until it is closed
}

type nipCall struct {
	Key  string
	Body map[string]any
}

func (s *nipService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	s.mu.Lock()
	s.calls = append(s.calls, nipCall{Key: r.Header.Get("Idempotency-Key"), Body: body})
	down, hold := s.down, s.hold
	s.mu.Unlock()
	if hold != nil {
		<-hold
	}
	w.Header().Set("Content-Type", "application/json")
	nip, _ := body["nip"].(string)
	switch {
	case down:
		w.WriteHeader(503)
		fmt.Fprint(w, `{"error": "gateway down"}`)
	case len(nip) != 10:
		w.WriteHeader(400)
		fmt.Fprint(w, `{"error": "NIP must have 10 digits"}`)
	default:
		fmt.Fprintf(w, `{"total": 100, "nip": %q}`, nip)
	}
}

func (s *nipService) setDown(v bool) { s.mu.Lock(); s.down = v; s.mu.Unlock() }

func (s *nipService) Calls() []nipCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]nipCall(nil), s.calls...)
}

// vatDef: prepare (transform) → file (http to url) → report (transform over both).
func vatDef(url string) string {
	return fmt.Sprintf(`{"name": "VAT %d", "settings": {"subject": "{{ input.client }} · {{ input.period }}",
	  "retryPolicy": {"maxRetries": 0}},
	  "steps": [
	    {"id": "prepare", "type": "transform", "config": {"output": {"period": "{{ input.period }}", "run": "{{ execution.id }}"}}},
	    {"id": "file", "type": "http", "config": {"method": "POST", "url": %q, "body": {"nip": "{{ input.nip }}", "password": "{{ input.password }}", "period": "{{ steps.prepare.output.period }}"}}},
	    {"id": "report", "type": "transform", "config": {"output": {"period": "{{ steps.prepare.output.period }}", "total": "{{ steps.file.output.total }}"}}}
	  ]}`, time.Now().UnixNano(), url)
}

// deadLettered starts an execution with input and waits for its dead letter.
func (h *harness) deadLettered(wf *models.Workflow, input string) (*models.Execution, *models.DeadLetter) {
	h.t.Helper()
	ex := h.start(wf, input)
	if got := h.wait(ex.ID, 20*time.Second); got.Status != models.ExecDLQPending {
		h.t.Fatalf("status %s, want DLQ_PENDING", got.Status)
	}
	return ex, h.onlyDeadLetter(ex.ID)
}

// onlyDeadLetter returns the dead letter of an execution, failing unless there is exactly one.
func (h *harness) onlyDeadLetter(executionID string) *models.DeadLetter {
	h.t.Helper()
	var rows []models.DeadLetter
	if err := h.db.Conn(context.Background()).Where("execution_id = ?", executionID).Find(&rows).Error; err != nil {
		h.t.Fatal(err)
	}
	if len(rows) != 1 {
		h.t.Fatalf("execution %s has %d dead letters, want 1", executionID, len(rows))
	}
	return &rows[0]
}

func (h *harness) deadLetterByID(id string) *models.DeadLetter {
	h.t.Helper()
	var dl models.DeadLetter
	if err := h.db.Conn(context.Background()).First(&dl, "id = ?", id).Error; err != nil {
		h.t.Fatal(err)
	}
	return &dl
}

// waitDeadLetter polls until the dead letter leaves processing.
func (h *harness) waitDeadLetter(id string) *models.DeadLetter {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		dl := h.deadLetterByID(id)
		if dl.Status != models.DLQProcessing {
			return dl
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("dead letter %s still processing", id)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (h *harness) replay(r engine.ReplayRequest) *engine.ReplayResult {
	h.t.Helper()
	r.OrganizationID = h.org
	if r.Actor == (audit.Actor{}) {
		r.Actor = h.user()
	}
	res, err := h.eng.Replay(context.Background(), r)
	if err != nil {
		h.t.Fatalf("replay %s: %v", r.Mode, err)
	}
	return res
}

// user creates an admin of the harness's organization and returns it as an actor.
func (h *harness) user() audit.Actor {
	h.t.Helper()
	u := models.User{ID: models.NewID(), Email: models.NewID() + "@biuro.example", Name: "Anna Nowak", PasswordHash: "x"}
	m := models.Membership{ID: models.NewID(), OrganizationID: h.org, UserID: u.ID, Role: models.RoleAdmin}
	if err := h.db.Conn(context.Background()).Create(&u).Error; err != nil {
		h.t.Fatal(err)
	}
	if err := h.db.Conn(context.Background()).Create(&m).Error; err != nil {
		h.t.Fatal(err)
	}
	return audit.Actor{Type: audit.ActorUser, ID: u.ID}
}

func stepAttempts(as []models.StepAttempt, stepID string) []models.StepAttempt {
	var out []models.StepAttempt
	for _, a := range as {
		if a.StepID == stepID {
			out = append(out, a)
		}
	}
	return out
}

func TestReplayFromFailedWithEditedInput(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		h := newHarness(t, db)
		svc := &nipService{}
		srv := httptest.NewServer(svc)
		defer srv.Close()
		ex, dl := h.deadLettered(h.workflow(vatDef(srv.URL)), `{"client": "Kowalski sp. z o.o.", "period": "2026-10", "nip": "526025027", "password": "hunter22"}`)
		if dl.Subject == nil || *dl.Subject != "Kowalski sp. z o.o. · 2026-10" || dl.ErrorType != "validation" ||
			dl.Reason != "NIP must have 10 digits (400 Bad Request)" || dl.FailedStepID != "file" {
			t.Fatalf("dead letter list columns: subject %v type %q reason %q step %q", dl.Subject, dl.ErrorType, dl.Reason, dl.FailedStepID)
		}
		// The operator fixes the NIP in the redacted input; the masked password keeps its value.
		res := h.replay(engine.ReplayRequest{DeadLetterID: dl.ID, Mode: engine.ReplayFromFailed,
			Input: json.RawMessage(`{"client": "Kowalski sp. z o.o.", "period": "2026-10", "nip": "5260250274", "password": "[REDACTED]"}`)})
		if res.ExecutionID != ex.ID {
			t.Fatalf("replay ran execution %s, want the same %s", res.ExecutionID, ex.ID)
		}
		got := h.wait(ex.ID, 20*time.Second)
		if got.Status != models.ExecSucceeded {
			t.Fatalf("replayed execution %s, want SUCCEEDED", got.Status)
		}
		calls := svc.Calls()
		if len(calls) != 2 || calls[1].Body["nip"] != "5260250274" || calls[1].Body["password"] != "hunter22" {
			t.Fatalf("service calls %+v", calls)
		}
		if calls[1].Key != engine.IdempotencyKey(ex.ID, "file", 2) || calls[0].Key == calls[1].Key {
			t.Errorf("replay key %q (first %q)", calls[1].Key, calls[0].Key)
		}
		as := h.attempts(ex.ID)
		if n := len(stepAttempts(as, "prepare")); n != 1 {
			t.Errorf("prepare ran %d times, want once (its output reused)", n)
		}
		report := stepAttempts(as, "report")
		if len(report) != 1 || !jsonHas(report[0].Output, "period", "2026-10") || !jsonHas(report[0].Output, "total", 100.0) {
			t.Errorf("report %+v", report)
		}
		dl = h.deadLetterByID(dl.ID)
		if dl.Status != models.DLQResolved || dl.ManualRetryCount != 1 || dl.LastManualRetryAt == nil || dl.ResolvedAt == nil {
			t.Errorf("dead letter after the replay: %+v", dl)
		}
		var rec models.ExecutionError
		db.Conn(context.Background()).First(&rec, "id = ?", dl.ErrorID)
		if rec.Status != models.ErrResolved || rec.ResolutionType == nil || *rec.ResolutionType != "manual_retry" {
			t.Errorf("error record %s %v", rec.Status, rec.ResolutionType)
		}
		// The original input stays on record; the audit shows before and after, masked.
		if len(got.OriginalInput) == 0 || !strings.Contains(string(got.OriginalInput), "526025027") {
			t.Errorf("original input %s", got.OriginalInput)
		}
		var entry models.AuditEntry
		db.Conn(context.Background()).First(&entry, "entity_id = ? AND action = ?", dl.ID, "dlq.retry")
		d := string(entry.Details)
		if !strings.Contains(d, `"inputBefore"`) || !strings.Contains(d, "5260250274") || strings.Contains(d, "hunter22") {
			t.Errorf("dlq.retry details %s", d)
		}
		if acts := strings.Join(h.auditActions(), ","); !strings.Contains(acts, "dlq.retry") || !strings.Contains(acts, "dlq.resolved") {
			t.Errorf("audit %s", acts)
		}
	})
}

func TestReplayThatFailsReturnsTheItem(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		h := newHarness(t, db)
		svc := &nipService{}
		srv := httptest.NewServer(svc)
		defer srv.Close()
		ex, dl := h.deadLettered(h.workflow(vatDef(srv.URL)), `{"client": "A", "period": "2026-10", "nip": "1"}`)
		svc.setDown(true)
		// The override gives the replay one retry: two calls, then the item is pending again.
		one, second, noJitter := 1, 1000, 0.0
		h.replay(engine.ReplayRequest{DeadLetterID: dl.ID, Mode: engine.ReplayFromFailed,
			Input:       json.RawMessage(`{"client": "A", "period": "2026-10", "nip": "5260250274"}`),
			RetryPolicy: &retry.Spec{MaxRetries: &one, InitialDelayMs: &second, JitterRatio: &noJitter}})
		back := h.waitDeadLetter(dl.ID)
		if back.Status != models.DLQPending || back.ErrorType != "transient" || !strings.Contains(back.Reason, "gateway down") ||
			back.ManualRetryCount != 1 || back.ErrorID == dl.ErrorID || back.RetryCount != 1 {
			t.Fatalf("returned item: %+v", back)
		}
		h.onlyDeadLetter(ex.ID) // exactly one item for the execution
		if n := len(svc.Calls()); n != 3 {
			t.Errorf("calls %d, want 3 (the first run, the replay and its one retry)", n)
		}
		if got := h.wait(ex.ID, time.Second); got.Status != models.ExecDLQPending {
			t.Errorf("execution %s", got.Status)
		}
	})
}

func TestReplaySkipAndResume(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		h := newHarness(t, db)
		svc := &nipService{}
		srv := httptest.NewServer(svc)
		defer srv.Close()
		wf := h.workflow(vatDef(srv.URL))

		// Skip the failed step with an operator's output: the next step reads it.
		ex, dl := h.deadLettered(wf, `{"client": "A", "period": "2026-09", "nip": "1"}`)
		h.replay(engine.ReplayRequest{DeadLetterID: dl.ID, Mode: engine.ReplaySkipFailed, Output: json.RawMessage(`{"total": 7}`)})
		if got := h.wait(ex.ID, 20*time.Second); got.Status != models.ExecSucceeded {
			t.Fatalf("skip: %s", got.Status)
		}
		as := h.attempts(ex.ID)
		file := stepAttempts(as, "file")
		if len(file) != 2 || file[1].Status != models.StepSkipped {
			t.Fatalf("file attempts %+v", file)
		}
		if r := stepAttempts(as, "report"); len(r) != 1 || !jsonHas(r[0].Output, "total", 7.0) {
			t.Errorf("report after skip %+v", r)
		}
		if n := len(svc.Calls()); n != 1 {
			t.Errorf("skip called the service: %d calls", n)
		}
		if dl := h.deadLetterByID(dl.ID); dl.Status != models.DLQResolved {
			t.Errorf("after skip-and-continue: %s", dl.Status)
		}

		// Resume from an earlier step: prepare and file run again, with new keys.
		ex, dl = h.deadLettered(wf, `{"client": "B", "period": "2026-08", "nip": "2"}`)
		h.replay(engine.ReplayRequest{DeadLetterID: dl.ID, Mode: engine.ReplayFromStep, FromStepID: "prepare",
			Input: json.RawMessage(`{"client": "B", "period": "2026-07", "nip": "5260250274"}`)})
		if got := h.wait(ex.ID, 20*time.Second); got.Status != models.ExecSucceeded {
			t.Fatalf("resume: %s", got.Status)
		}
		as = h.attempts(ex.ID)
		prep := stepAttempts(as, "prepare")
		if len(prep) != 2 || prep[1].Attempt != 2 || !jsonHas(prep[1].Output, "period", "2026-07") {
			t.Fatalf("prepare attempts %+v", prep)
		}
		if r := stepAttempts(as, "report"); len(r) != 1 || !jsonHas(r[0].Output, "period", "2026-07") {
			t.Errorf("report after resume %+v", r)
		}
	})
}

func TestReplayFullIsANewExecution(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		h := newHarness(t, db)
		svc := &nipService{}
		srv := httptest.NewServer(svc)
		defer srv.Close()
		ex, dl := h.deadLettered(h.workflow(vatDef(srv.URL)), `{"client": "C", "period": "2026-10", "nip": "3"}`)
		res := h.replay(engine.ReplayRequest{DeadLetterID: dl.ID, Mode: engine.ReplayFull,
			Input: json.RawMessage(`{"client": "C", "period": "2026-10", "nip": "5260250274"}`)})
		if res.ExecutionID == ex.ID {
			t.Fatal("a full retry must be a new execution")
		}
		nx := h.wait(res.ExecutionID, 20*time.Second)
		if nx.Status != models.ExecSucceeded || nx.RetryOf == nil || *nx.RetryOf != ex.ID || nx.TriggerType != engine.TriggerRetry {
			t.Fatalf("new execution %+v", nx)
		}
		if n := len(stepAttempts(h.attempts(nx.ID), "prepare")); n != 1 {
			t.Errorf("prepare ran %d times in the new execution", n)
		}
		if old := h.wait(ex.ID, time.Second); old.Status != models.ExecFailed {
			t.Errorf("original %s, want FAILED", old.Status)
		}
		if dl := h.deadLetterByID(dl.ID); dl.Status != models.DLQResolved || dl.ReplayExecutionID == nil || *dl.ReplayExecutionID != nx.ID {
			t.Errorf("dead letter %+v", dl)
		}
	})
}

func TestReplayConflictsAndRules(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		h := newHarness(t, db)
		svc := &nipService{}
		srv := httptest.NewServer(svc)
		defer srv.Close()
		ctx := context.Background()
		_, dl := h.deadLettered(h.workflow(vatDef(srv.URL)), `{"client": "D", "period": "2026-10", "nip": "4"}`)
		actor := h.user()

		// Bad requests: field messages, nothing written.
		bad := []struct {
			r     engine.ReplayRequest
			field string
		}{
			{engine.ReplayRequest{Mode: "again"}, "retryType"},
			{engine.ReplayRequest{Mode: engine.ReplayFromStep, FromStepID: "nope"}, "fromStepId"},
			{engine.ReplayRequest{Mode: engine.ReplayFromStep, FromStepID: "report"}, "fromStepId"},
			{engine.ReplayRequest{Mode: engine.ReplayFromFailed, Input: json.RawMessage(`[1]`)}, "modifiedInput"},
			{engine.ReplayRequest{Mode: engine.ReplaySkipFailed, Output: json.RawMessage(`{`)}, "output"},
			{engine.ReplayRequest{Mode: engine.ReplayFromFailed, Notes: strings.Repeat("n", 2001)}, "resolutionNotes"},
		}
		for _, b := range bad {
			b.r.OrganizationID, b.r.DeadLetterID, b.r.Actor = h.org, dl.ID, actor
			_, err := h.eng.Replay(ctx, b.r)
			var me *apperr.Error
			if !asModelError(err, &me) || me.Code != apperr.EINVALID || me.Fields[b.field] == "" {
				t.Errorf("%+v: error %v, want a message on %s", b.r.Mode, err, b.field)
			}
		}
		if cur := h.deadLetterByID(dl.ID); cur.Status != models.DLQPending || cur.ManualRetryCount != 0 {
			t.Fatalf("a refused request changed the item: %+v", cur)
		}

		// Another organization's item does not exist.
		if _, err := h.eng.Replay(ctx, engine.ReplayRequest{OrganizationID: models.NewID(), DeadLetterID: dl.ID, Mode: engine.ReplayFromFailed}); apperr.ErrorCode(err) != apperr.ENOTFOUND {
			t.Errorf("other organization: %v", err)
		}

		// Two people at once: one replay wins, the other gets a conflict. The gateway holds
		// its answer until both have asked, so the winner's replay cannot fail back to
		// pending before the other asks (it did under the race detector).
		hold := make(chan struct{})
		svc.mu.Lock()
		svc.hold = hold
		svc.mu.Unlock()
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = h.eng.Replay(ctx, engine.ReplayRequest{OrganizationID: h.org, DeadLetterID: dl.ID, Mode: engine.ReplayFromFailed, Actor: actor})
			}()
		}
		wg.Wait()
		close(hold)
		ok, conflicts := 0, 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case apperr.ErrorCode(err) == apperr.ECONFLICT:
				conflicts++
			}
		}
		if ok != 1 || conflicts != 1 {
			t.Fatalf("concurrent replays: %v", errs)
		}
		back := h.waitDeadLetter(dl.ID)
		if back.ManualRetryCount != 1 {
			t.Errorf("manual retries %d, want 1", back.ManualRetryCount)
		}

		// Resolve with notes, with an idempotency key: a repeat answers the same; a later
		// action conflicts.
		settle := engine.SettleRequest{OrganizationID: h.org, DeadLetterID: dl.ID, Status: models.DLQResolved,
			Notes: "Filed by hand in the e-Deklaracje portal.", Actor: actor, IdempotencyKey: "k-1"}
		for i := 0; i < 2; i++ {
			if _, err := h.eng.Settle(ctx, settle); err != nil {
				t.Fatalf("settle %d: %v", i, err)
			}
		}
		done := h.deadLetterByID(dl.ID)
		if done.Status != models.DLQResolved || done.ResolutionNotes == nil || *done.ResolutionNotes != settle.Notes ||
			done.ResolvedBy == nil || *done.ResolvedBy != actor.ID {
			t.Errorf("resolved item %+v", done)
		}
		if got := h.wait(done.ExecutionID, time.Second); got.Status != models.ExecFailed {
			t.Errorf("execution after resolve: %s", got.Status)
		}
		if _, err := h.eng.Settle(ctx, engine.SettleRequest{OrganizationID: h.org, DeadLetterID: dl.ID, Status: models.DLQSkipped, Actor: actor}); apperr.ErrorCode(err) != apperr.ECONFLICT {
			t.Errorf("skip after resolve: %v", err)
		}
		if n := strings.Count(strings.Join(h.auditActions(), ","), "dlq.resolved"); n != 1 {
			t.Errorf("dlq.resolved recorded %d times", n)
		}
	})
}

func asModelError(err error, target **apperr.Error) bool {
	me, ok := err.(*apperr.Error)
	if ok {
		*target = me
	}
	return ok
}
