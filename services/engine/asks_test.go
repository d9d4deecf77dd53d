package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/engine"
	"lifeline/services/notify"
)

// askEnv is a harness whose organization has an owner, an admin and two accountants, and a
// notifier that keeps the e-mail links' tokens it is handed (who → token).
type askEnv struct {
	*harness
	owner, admin, acc, acc2 string
	emails                  map[string]string
	links                   *linkKeeper
	clock                   *modeltest.MovableClock
}

// linkKeeper is a notifier that records nothing but the requests' notices.
type linkKeeper struct {
	mu      sync.Mutex
	notices []notify.InterventionNotice
}

func (k *linkKeeper) Emit(*gorm.DB, notify.Event) error                { return nil }
func (k *linkKeeper) EmitEscalation(*gorm.DB, notify.Escalation) error { return nil }
func (k *linkKeeper) EmitIntervention(_ *gorm.DB, n notify.InterventionNotice) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.notices = append(k.notices, n)
	return nil
}

// token returns the latest link token sent to user for request id.
func (k *linkKeeper) token(id, user string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	tok := ""
	for _, n := range k.notices {
		for _, p := range n.People {
			if n.InterventionID == id && p.UserID == user {
				tok = p.Token
			}
		}
	}
	return tok
}

func (k *linkKeeper) stages(id string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, n := range k.notices {
		if n.InterventionID == id {
			out = append(out, n.Stage)
		}
	}
	return out
}

func newAskEnv(t *testing.T, db *models.DB) *askEnv {
	t.Helper()
	k := &linkKeeper{}
	clock := modeltest.Clock(t, db) // before the harness's River runners
	h := newHarnessConfig(t, db, harnessSteps(), engine.Config{Notifier: k})
	e := &askEnv{harness: h, links: k, emails: map[string]string{}, clock: clock}
	for _, m := range []struct {
		id   *string
		role string
	}{{&e.owner, models.RoleOwner}, {&e.admin, models.RoleAdmin}, {&e.acc, models.RoleAccountant}, {&e.acc2, models.RoleAccountant}} {
		u := models.User{ID: models.NewID(), Email: m.role + "-" + strings.ReplaceAll(models.NewID(), "-", "") + "@biuro.example", Name: m.role, PasswordHash: "x", CreatedAt: time.Now().UTC()}
		h.create(&u, &models.Membership{ID: models.NewID(), OrganizationID: h.org, UserID: u.ID, Role: m.role, CreatedAt: time.Now().UTC()})
		*m.id = u.ID
		e.emails[u.ID] = u.Email
	}
	return e
}

func (h *harness) create(rows ...any) {
	h.t.Helper()
	for _, r := range rows {
		if err := h.db.Conn(context.Background()).Create(r).Error; err != nil {
			h.t.Fatal(err)
		}
	}
}

// askDef is a workflow of an ask step (config cfg) and a transform step that outputs what
// the ask step answered.
func askDef(cfg string) string {
	return `{"name": "Ask ` + models.NewID() + `", "settings": {"retryPolicy": {"maxRetries": 2, "initialDelayMs": 1000}}, "steps": [
	  {"id": "ask", "type": "ask", "config": ` + cfg + `},
	  {"id": "after", "type": "transform", "config": {"output": {"got": "{{ steps.ask.output }}"}}}]}`
}

// waitFor polls until the execution is in status.
func (e *askEnv) waitFor(id, status string) *models.Execution {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var ex models.Execution
		if err := e.db.Conn(context.Background()).First(&ex, "id = ?", id).Error; err != nil {
			e.t.Fatal(err)
		}
		if ex.Status == status {
			return &ex
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("execution %s is %s, not %s:%s", id, ex.Status, status, e.describe(id))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// request returns the execution's open request, once it waits.
func (e *askEnv) request(exID string) *models.Intervention {
	e.t.Helper()
	e.waitFor(exID, models.ExecWaiting)
	ivs, err := e.eng.Asks().List(context.Background(), e.org, models.InterventionFilter{ExecutionID: exID, Status: models.InterventionOpen})
	if err != nil || len(ivs) != 1 {
		e.t.Fatalf("open requests of %s: %d %v", exID, len(ivs), err)
	}
	return &ivs[0]
}

func (e *askEnv) answer(iv *models.Intervention, user, role string, fill func(*engine.AnswerRequest)) (*models.Intervention, error) {
	r := engine.AnswerRequest{OrganizationID: e.org, ID: iv.ID, Actor: audit.Actor{Type: audit.ActorUser, ID: user},
		ActorName: e.emails[user], Role: role}
	fill(&r)
	return e.eng.Asks().Answer(context.Background(), r)
}

// afterOutput is what the transform after the ask step output.
func (e *askEnv) afterOutput(exID string) map[string]any {
	e.t.Helper()
	for _, a := range e.attempts(exID) {
		if a.StepID == "after" && a.Status == models.StepSucceeded {
			var out struct{ Got map[string]any }
			if err := json.Unmarshal(a.Output, &out); err != nil {
				e.t.Fatalf("after's output %s: %v", a.Output, err)
			}
			return out.Got
		}
	}
	e.t.Fatalf("no output of after:%s", e.describe(exID))
	return nil
}

// expire moves the request's times back so that the sweep finds it due.
// expire moves the database's clock a second past the request's time in col (its expiry,
// reminder or next escalation), as the hours to it would pass.
func (e *askEnv) expire(iv *models.Intervention, col string) {
	e.t.Helper()
	var at *time.Time
	if err := e.db.Conn(context.Background()).Raw("SELECT "+col+" FROM interventions WHERE id = ?", iv.ID).Row().Scan(&at); err != nil {
		e.t.Fatal(err)
	}
	if at == nil {
		e.t.Fatalf("request %s has no %s", iv.ID, col)
	}
	if next := at.Add(time.Second); next.After(e.clock.Now()) {
		e.clock.Set(next)
	}
}

func (e *askEnv) sweep() engine.SweepResult {
	e.t.Helper()
	r, err := e.eng.Asks().Sweep(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// TestAskEachKind: each kind answered through the facade; the next step reads the answer.
func TestAskEachKind(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newAskEnv(t, db)
		cases := []struct {
			name, cfg string
			fill      func(*engine.AnswerRequest)
			check     func(map[string]any) bool
		}{
			{"approval", `{"kind": "approval", "title": "VAT {{ input.period }}", "timeoutMs": 60000}`,
				func(r *engine.AnswerRequest) { r.Answer, r.Note = "approved", "ok" },
				func(o map[string]any) bool {
					return o["answer"] == "approved" && o["note"] == "ok" && o["by"] != "" && o["at"] != nil
				}},
			{"input", `{"kind": "input", "title": "Invoice", "timeoutMs": 60000, "schema": {"fields": [
				{"name": "invoiceNo", "type": "string", "required": true, "pattern": "^FV/"}, {"name": "amount", "type": "amount", "min": "0.01"},
				{"name": "paidOn", "type": "date"}, {"name": "n", "type": "number", "min": 1, "max": 10}, {"name": "ok", "type": "boolean"},
				{"name": "category", "type": "enum", "options": ["cost", "transfer"]}]}}`,
				func(r *engine.AnswerRequest) {
					r.Values = map[string]any{"invoiceNo": "FV/1/2026", "amount": "1234,5", "paidOn": "2026-11-25", "n": "3", "ok": "on", "category": "cost"}
				},
				func(o map[string]any) bool {
					return o["invoiceNo"] == "FV/1/2026" && o["amount"] == "1234.50" && o["paidOn"] == "2026-11-25" && o["n"] == float64(3) && o["ok"] == true &&
						o["category"] == "cost" && len(o) == 6
				}},
			{"decision", `{"kind": "decision", "title": "Cost or transfer?", "timeoutMs": 60000, "options": [{"id": "cost"}, {"id": "transfer"}]}`,
				func(r *engine.AnswerRequest) { r.Option = "transfer" },
				func(o map[string]any) bool { return o["option"] == "transfer" && o["by"] != "" }},
			{"error_resolution", `{"kind": "error_resolution", "title": "Fix it", "timeoutMs": 60000}`,
				func(r *engine.AnswerRequest) { r.Option, r.Values = "continue", map[string]any{"fixed": true} },
				func(o map[string]any) bool { return o["option"] == "continue" && o["values"] != nil }},
		}
		for _, c := range cases {
			wf := e.workflow(askDef(c.cfg))
			ex := e.start(wf, `{"period": "2026-10"}`)
			iv := e.request(ex.ID)
			if iv.Kind != c.name || iv.Status != models.InterventionOpen {
				t.Fatalf("%s: request %+v", c.name, iv)
			}
			if c.name == "approval" && iv.Title != "VAT 2026-10" {
				t.Errorf("approval: title %q, want the rendered template", iv.Title)
			}
			got, err := e.answer(iv, e.acc, models.RoleAccountant, c.fill)
			if err != nil {
				t.Fatalf("%s: answer: %v", c.name, err)
			}
			if got.Status != models.InterventionAnswered || deref(got.AnsweredByName) != e.emails[e.acc] {
				t.Errorf("%s: answered %+v", c.name, got)
			}
			e.waitFor(ex.ID, models.ExecSucceeded)
			if out := e.afterOutput(ex.ID); !c.check(out) {
				t.Errorf("%s: the next step read %v", c.name, out)
			}
		}
		// A bad answer: 422 with field messages, nothing recorded.
		wf := e.workflow(askDef(`{"kind": "input", "title": "Invoice", "timeoutMs": 60000, "schema": {"fields": [{"name": "invoiceNo", "type": "string", "required": true, "pattern": "^FV/"}, {"name": "n", "type": "number", "max": 10}]}}`))
		ex := e.start(wf, `{}`)
		iv := e.request(ex.ID)
		_, err := e.answer(iv, e.acc, models.RoleAccountant, func(r *engine.AnswerRequest) { r.Values = map[string]any{"invoiceNo": "X", "n": 11, "zzz": 1} })
		var ae *apperr.Error
		if !asAppErr(err, &ae) || ae.Code != apperr.EINVALID || ae.Fields["values.invoiceNo"] == "" || ae.Fields["values.n"] == "" || ae.Fields["values.zzz"] == "" {
			t.Fatalf("bad values: %v", err)
		}
		if again, _ := e.eng.Asks().Get(context.Background(), e.org, iv.ID); again.Status != models.InterventionOpen {
			t.Errorf("a refused answer changed the request: %s", again.Status)
		}
	})
}

func asAppErr(err error, out **apperr.Error) bool {
	ae, ok := err.(*apperr.Error)
	if ok {
		*out = ae
	}
	return ok
}

// TestAskTimeouts: each kind's timeout (the sweep, after the request's time moved back).
func TestAskTimeouts(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newAskEnv(t, db)
		cases := []struct {
			name, cfg, status, code string
			check                   func(map[string]any) bool
		}{
			{"approval fails", `{"kind": "approval", "title": "A", "timeoutMs": 60000}`, models.ExecDLQPending, engine.CodeNoAnswer, nil},
			{"approval continues", `{"kind": "approval", "title": "A", "timeoutMs": 60000, "onReject": "continue"}`, models.ExecSucceeded, "",
				func(o map[string]any) bool {
					return o["answer"] == "rejected" && o["timedOut"] == true && o["by"] == nil
				}},
			{"decision default", `{"kind": "decision", "title": "D", "timeoutMs": 60000, "options": [{"id": "a"}, {"id": "b"}], "defaultOption": "b"}`, models.ExecSucceeded, "",
				func(o map[string]any) bool { return o["option"] == "b" && o["timedOut"] == true }},
			{"decision fails", `{"kind": "decision", "title": "D", "timeoutMs": 60000, "options": [{"id": "a"}, {"id": "b"}]}`, models.ExecDLQPending, engine.CodeNoAnswer, nil},
			{"input fails", `{"kind": "input", "title": "I", "timeoutMs": 60000, "schema": {"fields": [{"name": "x", "type": "string"}]}}`, models.ExecDLQPending, engine.CodeNoAnswer, nil},
			{"error resolution fails", `{"kind": "error_resolution", "title": "E", "timeoutMs": 60000}`, models.ExecDLQPending, engine.CodeNoAnswer, nil},
		}
		for _, c := range cases {
			ex := e.start(e.workflow(askDef(c.cfg)), `{}`)
			iv := e.request(ex.ID)
			e.expire(iv, "expires_at")
			e.sweep()
			got, _ := e.eng.Asks().Get(context.Background(), e.org, iv.ID)
			if got.Status != models.InterventionTimedOut || got.AnsweredBy != nil {
				t.Errorf("%s: request %s by %v", c.name, got.Status, got.AnsweredBy)
			}
			e.waitFor(ex.ID, c.status)
			if c.check != nil && !c.check(e.afterOutput(ex.ID)) {
				t.Errorf("%s: the next step read %v", c.name, e.afterOutput(ex.ID))
			}
			if c.code != "" {
				as := e.attempts(ex.ID)
				if len(as) != 1 || deref(as[0].ErrorCode) != c.code || deref(as[0].ErrorType) != "timeout" {
					t.Errorf("%s: attempts (one, never retried, %s):%s", c.name, c.code, e.describe(ex.ID))
				}
			}
			if _, err := e.answer(got, e.admin, models.RoleAdmin, func(r *engine.AnswerRequest) { r.Answer, r.Option = "approved", "a" }); apperr.ErrorCode(err) != apperr.ECONFLICT {
				t.Errorf("%s: an answer after the timeout: %v, want ECONFLICT", c.name, err)
			}
		}
		// A reminder before the timeout tells the holders once and never ends the run.
		ex := e.start(e.workflow(askDef(`{"kind": "approval", "title": "R", "timeoutMs": 600000, "remindBeforeMs": 60000}`)), `{}`)
		iv := e.request(ex.ID)
		e.expire(iv, "remind_at")
		e.sweep()
		e.sweep()
		if got := e.links.stages(iv.ID); strings.Join(got, ",") != "requested,reminded" {
			t.Errorf("notices %v, want requested then one reminder", got)
		}
		if got, _ := e.eng.Asks().Get(context.Background(), e.org, iv.ID); got.Status != models.InterventionOpen || got.RemindAt != nil {
			t.Errorf("after the reminder: %s remind %v", got.Status, got.RemindAt)
		}
		e.waitFor(ex.ID, models.ExecWaiting)
	})
}

// TestAskEscalation: levels in order, each once per round, for repeat rounds.
func TestAskEscalation(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newAskEnv(t, db)
		cfg := `{"kind": "approval", "title": "E", "timeoutMs": 86400000, "assignees": ["` + e.emails[e.acc] + `"],
		  "escalation": {"levels": [{"afterMs": 3600000, "to": ["role:admin"]}, {"afterMs": 7200000, "to": ["` + strings.ToUpper(e.emails[e.acc2]) + `"]}], "repeat": 2}}`
		ex := e.start(e.workflow(askDef(cfg)), `{}`)
		iv := e.request(ex.ID)
		if n, _ := e.eng.Asks().CountOpenFor(context.Background(), e.org, e.acc2, models.RoleAccountant); n != 0 {
			t.Errorf("acc2 holds %d before any escalation", n)
		}
		if r := e.sweep(); r.Escalated != 0 {
			t.Fatalf("escalated before its time: %+v", r)
		}
		want := []struct {
			level, round int
			holder       string
		}{{1, 1, "role:admin"}, {2, 1, strings.ToLower(e.emails[e.acc2])}, {1, 2, "role:admin"}, {2, 2, strings.ToLower(e.emails[e.acc2])}}
		for i, w := range want {
			e.expire(iv, "next_escalation_at")
			e.sweep()
			e.sweep() // a second sweep at once changes nothing: each level once
			got, _ := e.eng.Asks().Get(context.Background(), e.org, iv.ID)
			if got.EscalationLevel != w.level || got.EscalationRound != w.round || len(got.Holders) != 1 || got.Holders[0] != w.holder {
				t.Fatalf("escalation %d: level %d round %d holders %v, want %+v", i+1, got.EscalationLevel, got.EscalationRound, got.Holders, w)
			}
			if (i < len(want)-1) != (got.NextEscalationAt != nil) {
				t.Fatalf("escalation %d: next at %v", i+1, got.NextEscalationAt)
			}
		}
		e.clock.Advance(3 * time.Hour) // past where a third round's first level would be
		e.sweep()
		n := 0
		for _, a := range e.auditActions() {
			if a == "intervention.escalated" {
				n++
			}
		}
		if n != 4 {
			t.Errorf("%d escalations audited, want 4 (2 levels × 2 rounds)", n)
		}
		if got := e.links.stages(iv.ID); strings.Join(got, ",") != "requested,escalated,escalated,escalated,escalated" {
			t.Errorf("notices %v", got)
		}
		// The holder now (acc2) may answer; the first assignee (acc) no longer holds it.
		if n, _ := e.eng.Asks().CountOpenFor(context.Background(), e.org, e.acc2, models.RoleAccountant); n != 1 {
			t.Errorf("acc2 holds %d open requests, want 1", n)
		}
		if _, err := e.answer(iv, e.acc, models.RoleAccountant, func(r *engine.AnswerRequest) { r.Answer = "approved" }); apperr.ErrorCode(err) != apperr.EFORBIDDEN {
			t.Errorf("the first holder answered after the escalation: %v", err)
		}
		if _, err := e.answer(iv, e.acc2, models.RoleAccountant, func(r *engine.AnswerRequest) { r.Answer = "approved" }); err != nil {
			t.Fatal(err)
		}
		e.waitFor(ex.ID, models.ExecSucceeded)
	})
}

// TestAskConcurrentAnswers: two answers held at the same point → exactly one wins; the
// other's ECONFLICT names who answered.
func TestAskConcurrentAnswers(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newAskEnv(t, db)
		ex := e.start(e.workflow(askDef(`{"kind": "approval", "title": "C", "timeoutMs": 60000, "assignees": ["role:accountant"]}`)), `{}`)
		iv := e.request(ex.ID)
		var arrived sync.WaitGroup
		arrived.Add(2)
		release := make(chan struct{})
		e.eng.SetHooks(engine.Hooks{BeforeTx: func(tr, id string) {
			if tr == engine.TransitionAnswer && id == ex.ID {
				arrived.Done()
				<-release
			}
		}})
		errs := make([]error, 2)
		var done sync.WaitGroup
		for i, u := range []string{e.acc, e.acc2} {
			done.Add(1)
			go func() {
				defer done.Done()
				_, errs[i] = e.answer(iv, u, models.RoleAccountant, func(r *engine.AnswerRequest) { r.Answer = "approved" })
			}()
		}
		arrived.Wait() // both checked the request open, before either transaction began
		close(release)
		done.Wait()
		e.eng.SetHooks(engine.Hooks{})
		won, lost := 0, -1
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case apperr.ErrorCode(err) == apperr.ECONFLICT:
				lost = i
			default:
				t.Fatalf("answer %d: %v", i, err)
			}
		}
		if won != 1 || lost < 0 {
			t.Fatalf("won %d, errors %v", won, errs)
		}
		got, _ := e.eng.Asks().Get(context.Background(), e.org, iv.ID)
		if !strings.Contains(errs[lost].Error(), deref(got.AnsweredByName)) {
			t.Errorf("the loser's error %q does not name the winner %s", errs[lost], deref(got.AnsweredByName))
		}
		e.waitFor(ex.ID, models.ExecSucceeded)
		if n := countSteps(e.attempts(ex.ID), "after"); n != 1 {
			t.Errorf("the next step ran %d times", n)
		}
		// The winner's idempotency key gets its answer back; another key a conflict.
		winner := []string{e.acc, e.acc2}[1-lost]
		if _, err := e.answer(iv, winner, models.RoleAccountant, func(r *engine.AnswerRequest) { r.Answer = "rejected"; r.IdempotencyKey = "k2" }); apperr.ErrorCode(err) != apperr.ECONFLICT {
			t.Errorf("another key after the answer: %v", err)
		}
	})
}

func countSteps(as []models.StepAttempt, step string) int {
	n := 0
	for _, a := range as {
		if a.StepID == step {
			n++
		}
	}
	return n
}

// TestAskIdempotencyKey: the same key from the same user gets the recorded answer back.
func TestAskIdempotencyKey(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newAskEnv(t, db)
		ex := e.start(e.workflow(askDef(`{"kind": "decision", "title": "D", "timeoutMs": 60000, "options": [{"id": "a"}, {"id": "b"}]}`)), `{}`)
		iv := e.request(ex.ID)
		fill := func(r *engine.AnswerRequest) { r.Option, r.IdempotencyKey = "a", "key-1" }
		first, err := e.answer(iv, e.acc, models.RoleAccountant, fill)
		if err != nil {
			t.Fatal(err)
		}
		again, err := e.answer(iv, e.acc, models.RoleAccountant, fill)
		if err != nil || again.ID != first.ID || deref(again.IdempotencyKey) != "key-1" {
			t.Fatalf("the same key again: %+v %v", again, err)
		}
		if _, err := e.answer(iv, e.acc2, models.RoleAccountant, fill); apperr.ErrorCode(err) != apperr.ECONFLICT {
			t.Errorf("another user with the same key: %v", err)
		}
		e.waitFor(ex.ID, models.ExecSucceeded)
	})
}

// TestAskFourEyes: the user who started the execution, or edited its input, may not approve.
func TestAskFourEyes(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newAskEnv(t, db)
		wf := e.workflow(askDef(`{"kind": "approval", "title": "F", "timeoutMs": 60000, "fourEyes": true, "assignees": ["role:admin", "role:accountant"]}`))
		ex, _, err := e.eng.Start(context.Background(), engine.StartRequest{OrganizationID: e.org, WorkflowID: wf.ID, Input: []byte(`{}`),
			Actor: audit.Actor{Type: audit.ActorUser, ID: e.admin}})
		if err != nil {
			t.Fatal(err)
		}
		iv := e.request(ex.ID)
		ok, why := e.eng.Asks().MayAnswer(context.Background(), iv, e.admin, models.RoleAdmin)
		if ok || why != "Four-eyes: you started this execution." {
			t.Errorf("MayAnswer for the starter: %v %q", ok, why)
		}
		_, err = e.answer(iv, e.admin, models.RoleAdmin, func(r *engine.AnswerRequest) { r.Answer = "approved" })
		if apperr.ErrorCode(err) != apperr.EFORBIDDEN || !strings.Contains(err.Error(), "Four-eyes") {
			t.Fatalf("the starter approved: %v", err)
		}
		if n, _ := e.eng.Asks().CountOpenFor(context.Background(), e.org, e.admin, models.RoleAdmin); n != 0 {
			t.Errorf("the starter counts %d requests to answer", n)
		}
		if ok, _ := e.eng.Asks().MayAnswer(context.Background(), iv, e.acc, models.RoleAccountant); !ok {
			t.Error("an accountant may not answer a request for accountants")
		}
		if ok, _ := e.eng.Asks().MayAnswer(context.Background(), iv, e.acc, models.RoleViewer); ok {
			t.Error("a viewer may answer")
		}
		// Rejected to the DLQ, then replayed with an input acc2 edited: acc2 may not approve.
		if _, err := e.answer(iv, e.acc, models.RoleAccountant, func(r *engine.AnswerRequest) { r.Answer = "rejected" }); err != nil {
			t.Fatal(err)
		}
		e.waitFor(ex.ID, models.ExecDLQPending)
		dl, err := db.DLQForExecution(context.Background(), e.org, ex.ID)
		if err != nil || dl == nil {
			t.Fatalf("dead letter %v", err)
		}
		if _, err := e.eng.Replay(context.Background(), engine.ReplayRequest{OrganizationID: e.org, DeadLetterID: dl.ID, Mode: engine.ReplayFromFailed,
			Input: json.RawMessage(`{"period": "2026-11"}`), Actor: audit.Actor{Type: audit.ActorUser, ID: e.acc2}}); err != nil {
			t.Fatal(err)
		}
		iv2 := e.request(ex.ID)
		if ok, why := e.eng.Asks().MayAnswer(context.Background(), iv2, e.acc2, models.RoleAccountant); ok || why != "Four-eyes: you edited its input." {
			t.Errorf("MayAnswer for the editor: %v %q", ok, why)
		}
		if ok, _ := e.eng.Asks().MayAnswer(context.Background(), iv2, e.admin, models.RoleAdmin); ok {
			t.Error("the starter may answer the new request")
		}
		if _, err := e.answer(iv2, e.owner, models.RoleOwner, func(r *engine.AnswerRequest) { r.Answer = "approved" }); err != nil {
			t.Fatalf("the owner: %v", err)
		}
		e.waitFor(ex.ID, models.ExecSucceeded)
	})
}

// TestAskLinks: the e-mail link is single use, expires with the request, and is its user's.
func TestAskLinks(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newAskEnv(t, db)
		ctx := context.Background()
		ex := e.start(e.workflow(askDef(`{"kind": "approval", "title": "L", "timeoutMs": 60000, "assignees": ["role:accountant"]}`)), `{}`)
		iv := e.request(ex.ID)
		tok, tok2 := e.links.token(iv.ID, e.acc), e.links.token(iv.ID, e.acc2)
		if len(tok) < 43 || tok2 == "" || tok == tok2 {
			t.Fatalf("tokens %q %q", tok, tok2)
		}
		var stored int64
		db.Conn(ctx).Model(&models.InterventionLink{}).Where("token_hash = ?", tok).Count(&stored)
		if stored != 0 {
			t.Error("a token is stored in clear")
		}
		check := func(user, token string, want engine.LinkCheck) {
			t.Helper()
			if got, err := e.eng.Asks().CheckLink(ctx, e.org, iv.ID, user, token); err != nil || got != want {
				t.Errorf("CheckLink(%s): %s %v, want %s", user, got, err, want)
			}
		}
		check(e.acc, tok, engine.LinkValid)
		check(e.acc2, tok, engine.LinkOtherUser)
		check(e.acc, "nonsense", engine.LinkUnknownToken)
		// Another user's token does not answer.
		if _, err := e.answer(iv, e.acc2, models.RoleAccountant, func(r *engine.AnswerRequest) { r.Answer, r.LinkToken = "approved", tok }); apperr.ErrorCode(err) != apperr.EFORBIDDEN {
			t.Fatalf("acc2 with acc's link: %v", err)
		}
		// An expired link does not answer.
		db.Conn(ctx).Model(&models.InterventionLink{}).Where("intervention_id = ? AND user_id = ?", iv.ID, e.acc2).Update("expires_at", time.Now().UTC().Add(-time.Minute))
		check(e.acc2, tok2, engine.LinkExpired)
		if _, err := e.answer(iv, e.acc2, models.RoleAccountant, func(r *engine.AnswerRequest) { r.Answer, r.LinkToken = "approved", tok2 }); apperr.ErrorCode(err) != apperr.EFORBIDDEN {
			t.Fatalf("an expired link: %v", err)
		}
		if got, _ := e.eng.Asks().Get(ctx, e.org, iv.ID); got.Status != models.InterventionOpen {
			t.Fatalf("a refused link changed the request: %s", got.Status)
		}
		if _, err := e.answer(iv, e.acc, models.RoleAccountant, func(r *engine.AnswerRequest) { r.Answer, r.LinkToken = "approved", tok }); err != nil {
			t.Fatalf("acc with their link: %v", err)
		}
		check(e.acc, tok, engine.LinkUsed)
		e.waitFor(ex.ID, models.ExecSucceeded)
	})
}

// TestAskTenancy: another organization's request is not found.
func TestAskTenancy(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newAskEnv(t, db)
		ctx := context.Background()
		ex := e.start(e.workflow(askDef(`{"kind": "approval", "title": "T", "timeoutMs": 60000}`)), `{}`)
		iv := e.request(ex.ID)
		other := models.NewID()
		if _, err := e.eng.Asks().Get(ctx, other, iv.ID); apperr.ErrorCode(err) != apperr.ENOTFOUND {
			t.Errorf("Get: %v", err)
		}
		if _, err := e.eng.Asks().Answer(ctx, engine.AnswerRequest{OrganizationID: other, ID: iv.ID, Actor: audit.Actor{Type: audit.ActorUser, ID: e.admin},
			Role: models.RoleAdmin, Answer: "approved"}); apperr.ErrorCode(err) != apperr.ENOTFOUND {
			t.Errorf("Answer: %v", err)
		}
		if err := e.eng.Asks().Cancel(ctx, engine.CancelRequest{OrganizationID: other, ExecutionID: ex.ID}); apperr.ErrorCode(err) != apperr.ENOTFOUND {
			t.Errorf("Cancel: %v", err)
		}
		if ivs, _ := e.eng.Asks().List(ctx, other, models.InterventionFilter{}); len(ivs) != 0 {
			t.Errorf("List: %d", len(ivs))
		}
		if got, _ := e.eng.Asks().CheckLink(ctx, other, iv.ID, e.acc, e.links.token(iv.ID, e.acc)); got != engine.LinkUnknownToken {
			t.Errorf("CheckLink: %s", got)
		}
	})
}

// TestAskWaitingHoldsNothing: a waiting execution leaves no job and no RUNNING attempt;
// the reconciler leaves it alone; a cancel ends it FAILED.
func TestAskWaitingHoldsNothing(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newAskEnv(t, db)
		ctx := context.Background()
		ex := e.start(e.workflow(askDef(`{"kind": "approval", "title": "W", "timeoutMs": 60000}`)), `{}`)
		iv := e.request(ex.ID)
		if _, err := e.eng.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		as := e.attempts(ex.ID)
		if len(as) != 1 || as[0].Status != models.StepWaiting || as[0].LeaseExpiresAt != nil {
			t.Fatalf("attempts:%s", e.describe(ex.ID))
		}
		// The job that parked it completes (River records that after the worker returns).
		for deadline := time.Now().Add(15 * time.Second); liveJobs(t, db, as[0].ID) != 0; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d live jobs for the waiting attempt", liveJobs(t, db, as[0].ID))
			}
		}
		if _, err := e.eng.StartRollback(ctx, engine.RollbackRequest{OrganizationID: e.org, ExecutionID: ex.ID}); apperr.ErrorCode(err) != apperr.ECONFLICT {
			t.Errorf("rollback of a waiting execution: %v", err)
		}
		if err := e.eng.Asks().Cancel(ctx, engine.CancelRequest{OrganizationID: e.org, ExecutionID: ex.ID, Note: "wrong client",
			Actor: audit.Actor{Type: audit.ActorUser, ID: e.admin}, ActorName: e.emails[e.admin]}); err != nil {
			t.Fatal(err)
		}
		got := e.waitFor(ex.ID, models.ExecFailed)
		if got.FinishedAt == nil {
			t.Error("cancelled without finishing")
		}
		if r, _ := e.eng.Asks().Get(ctx, e.org, iv.ID); r.Status != models.InterventionCancelled {
			t.Errorf("request %s", r.Status)
		}
		if err := e.eng.Asks().Cancel(ctx, engine.CancelRequest{OrganizationID: e.org, ExecutionID: ex.ID}); apperr.ErrorCode(err) != apperr.ECONFLICT {
			t.Errorf("a second cancel: %v", err)
		}
		if dl, _ := db.DLQForExecution(ctx, e.org, ex.ID); dl != nil {
			t.Error("a cancel made a dead letter")
		}
	})
}

// liveJobs counts River's jobs for an attempt that may still run.
func liveJobs(t testing.TB, db *models.DB, attemptID string) int64 {
	t.Helper()
	var n int64
	q := db.Conn(context.Background()).Table("river_job").Where("state IN ?", []string{"available", "scheduled", "running", "retryable", "pending"})
	if db.Dialect == models.Postgres {
		q = q.Where("args->>'attempt_id' = ?", attemptID)
	} else {
		q = q.Where("json_extract(args, '$.attempt_id') = ?", attemptID)
	}
	if err := q.Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAskRetriedFromDLQ: a rejected approval goes to the DLQ, never retried; replayed from
// the DLQ it asks again (a new request), and the execution goes on once answered.
func TestAskRetriedFromDLQ(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newAskEnv(t, db)
		ctx := context.Background()
		ex := e.start(e.workflow(askDef(`{"kind": "approval", "title": "D", "timeoutMs": 60000}`)), `{}`)
		iv := e.request(ex.ID)
		if _, err := e.answer(iv, e.acc, models.RoleAccountant, func(r *engine.AnswerRequest) { r.Answer, r.Note = "rejected", "wrong period" }); err != nil {
			t.Fatal(err)
		}
		e.waitFor(ex.ID, models.ExecDLQPending)
		as := e.attempts(ex.ID)
		if len(as) != 1 || deref(as[0].ErrorCode) != engine.CodeRejected || !strings.Contains(deref(as[0].ErrorMessage), "wrong period") {
			t.Fatalf("attempts:%s", e.describe(ex.ID))
		}
		dl, err := db.DLQForExecution(ctx, e.org, ex.ID)
		if err != nil || dl == nil {
			t.Fatalf("dead letter %v", err)
		}
		if _, err := e.eng.Replay(ctx, engine.ReplayRequest{OrganizationID: e.org, DeadLetterID: dl.ID, Mode: engine.ReplayFromFailed,
			Actor: audit.Actor{Type: audit.ActorUser, ID: e.admin}}); err != nil {
			t.Fatal(err)
		}
		iv2 := e.request(ex.ID)
		if iv2.ID == iv.ID || iv2.AttemptID == iv.AttemptID {
			t.Fatal("the replay reused the old request")
		}
		if _, err := e.answer(iv2, e.acc, models.RoleAccountant, func(r *engine.AnswerRequest) { r.Answer = "approved" }); err != nil {
			t.Fatal(err)
		}
		e.waitFor(ex.ID, models.ExecSucceeded)
	})
}

// TestAskOnlyAbove: at or below the limit the approval passes at once, by rule.
func TestAskOnlyAbove(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newAskEnv(t, db)
		wf := e.workflow(askDef(`{"kind": "approval", "title": "VAT", "timeoutMs": 60000, "onlyAbove": {"amount": "{{ input.vatDue }}", "limit": "50000.00"}}`))
		small := e.start(wf, `{"vatDue": "50000.00"}`)
		e.waitFor(small.ID, models.ExecSucceeded)
		if out := e.afterOutput(small.ID); out["answer"] != "approved" || out["by"] != "rule" {
			t.Errorf("at the limit: %v", out)
		}
		big := e.start(wf, `{"vatDue": "50000.01"}`)
		e.request(big.ID)
	})
}

// TestAskCrash: the process that parked an execution dies while it waits, and the answer's
// job is lost (the process died between the answer's commit and the enqueue): another
// process's reconciler queues the attempt again, and the execution continues once.
func TestAskCrash(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newAskEnv(t, db)
		ctx := context.Background()
		ex := e.start(e.workflow(askDef(`{"kind": "approval", "title": "K", "timeoutMs": 60000}`)), `{}`)
		iv := e.request(ex.ID)
		stop, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := e.runner.Stop(stop); err != nil { // the first process is gone
			t.Fatal(err)
		}
		if _, err := e.answer(iv, e.acc, models.RoleAccountant, func(r *engine.AnswerRequest) { r.Answer = "approved" }); err != nil {
			t.Fatal(err)
		}
		del := "DELETE FROM river_job WHERE kind = 'run_attempt' AND json_extract(args, '$.attempt_id') = ?"
		if db.Dialect == models.Postgres {
			del = "DELETE FROM river_job WHERE kind = 'run_attempt' AND args->>'attempt_id' = ?"
		}
		if err := db.Conn(ctx).Exec(del, iv.AttemptID).Error; err != nil { // its job was never queued
			t.Fatal(err)
		}
		_, runner, _, err := newStackConfig(db, testLogger(t), harnessSteps(), engine.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if err := runner.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = runner.Stop(ctx)
		})
		e.waitFor(ex.ID, models.ExecSucceeded)
		as := e.attempts(ex.ID)
		if countSteps(as, "ask") != 1 || countSteps(as, "after") != 1 {
			t.Errorf("the execution did not continue once:%s", e.describe(ex.ID))
		}
		if got, _ := e.eng.Asks().Get(ctx, e.org, iv.ID); got.Status != models.InterventionAnswered {
			t.Errorf("request %s", got.Status)
		}
	})
}

// TestAskErrorResolution: an error_resolution ask as a step's on-failure handler shows the
// failure; "continue" goes on at the handler's next step with the answer as its output,
// "abort" fails the handler to the DLQ.
func TestAskErrorResolution(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newAskEnv(t, db)
		office := nipOffice()
		t.Cleanup(office.Close)
		wf := e.workflow(`{"name": "Resolve ` + models.NewID() + `", "settings": {"retryPolicy": ` + noRetries + `}, "steps": [
		  {"id": "file", "type": "http", "config": {"method": "POST", "url": "` + office.URL + `/vat", "body": {"nip": "{{ input.nip }}"}},
		   "onFailure": {"handlerStepId": "resolve"}},
		  {"id": "email", "type": "transform", "config": {"output": {"sent": true}}},
		  {"id": "resolve", "type": "ask", "handler": true, "next": "email",
		   "config": {"kind": "error_resolution", "title": "Fix {{ failedStep.id }}", "timeoutMs": 60000}}]}`)
		for _, option := range []string{"continue", "abort"} {
			ex := e.start(wf, `{"nip": "123"}`)
			iv := e.request(ex.ID)
			if iv.Title != "Fix file" || !strings.Contains(iv.Message, "NIP") {
				t.Errorf("%s: the request does not show the failure: %q %q", option, iv.Title, iv.Message)
			}
			if _, err := e.answer(iv, e.acc, models.RoleAccountant, func(r *engine.AnswerRequest) { r.Option, r.Note = option, "checked" }); err != nil {
				t.Fatal(err)
			}
			if option == "abort" {
				e.waitFor(ex.ID, models.ExecDLQPending)
				continue
			}
			// A handler that names its next step: the execution ends SUCCEEDED after it.
			e.waitFor(ex.ID, models.ExecSucceeded)
			var resolved, emailed bool
			for _, a := range e.attempts(ex.ID) {
				resolved = resolved || (a.StepID == "resolve" && a.Status == models.StepSucceeded && strings.Contains(string(a.Output), `"continue"`))
				emailed = emailed || (a.StepID == "email" && a.Status == models.StepSucceeded)
			}
			if !resolved || !emailed {
				t.Errorf("continue did not go on at the handler's next step:%s", e.describe(ex.ID))
			}
		}
	})
}

// TestAskSweepJob: River's periodic asks_sweep job times a request out without anyone
// calling Sweep.
func TestAskSweepJob(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newAskEnv(t, db)
		ex := e.start(e.workflow(askDef(`{"kind": "decision", "title": "J", "timeoutMs": 60000, "options": [{"id": "a"}, {"id": "b"}], "defaultOption": "a"}`)), `{}`)
		iv := e.request(ex.ID)
		e.expire(iv, "expires_at")
		e.waitFor(ex.ID, models.ExecSucceeded) // the job runs every 5 s
		if got, _ := e.eng.Asks().Get(context.Background(), e.org, iv.ID); got.Status != models.InterventionTimedOut {
			t.Errorf("request %s", got.Status)
		}
	})
}
