package engine_test

import (
	"context"
	"testing"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/engine"
)

// TestAskRaces forces what can happen to one request at once, each interleaving by a hook
// (the first one held after its checks read the request open, before its transaction):
//   - an answer, and meanwhile the request times out: the answer loses (409), the timeout
//     stands (the approval fails to the DLQ) and nothing runs after the ask step;
//   - an answer, and meanwhile an admin cancels the execution: the answer loses, the
//     execution stays cancelled (FAILED, its request cancelled);
//   - a cancel, and meanwhile someone answers: the cancel loses (409), the execution goes
//     on with the answer.
func TestAskRaces(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newAskEnv(t, db)
		ctx := context.Background()
		wf := e.workflow(askDef(`{"kind": "approval", "title": "Zatwierdź", "timeoutMs": 60000}`))
		approve := func(r *engine.AnswerRequest) { r.Answer = "approved" }
		cancel := func(exID string) error {
			return e.eng.Asks().Cancel(ctx, engine.CancelRequest{OrganizationID: e.org, ExecutionID: exID, Note: "zły klient",
				Actor: audit.Actor{Type: audit.ActorUser, ID: e.admin}, ActorName: "admin"})
		}
		// held runs first (its goroutine held at BeforeTx of transition tr), then meanwhile,
		// and returns first's error once it went on.
		held := func(exID, tr string, first func() error, meanwhile func()) error {
			t.Helper()
			arrived, release := make(chan struct{}), make(chan struct{})
			e.eng.SetHooks(engine.Hooks{BeforeTx: func(name, id string) {
				if name == tr && id == exID {
					close(arrived)
					<-release
				}
			}})
			errc := make(chan error, 1)
			go func() { errc <- first() }()
			<-arrived
			e.eng.SetHooks(engine.Hooks{})
			meanwhile()
			close(release)
			return <-errc
		}

		// answerHeld is an accountant's approval of iv, held as held says.
		answerHeld := func(exID string, iv *models.Intervention, meanwhile func()) error {
			return held(exID, engine.TransitionAnswer, func() error {
				_, err := e.answer(iv, e.acc, models.RoleAccountant, approve)
				return err
			}, meanwhile)
		}

		// settled waits for the execution's status and checks its request's status, who
		// answered it ("": nobody) and how often the step after the ask ran.
		settled := func(exID string, iv *models.Intervention, exStatus, ivStatus, by string, after int) {
			t.Helper()
			e.waitFor(exID, exStatus)
			if got, _ := e.eng.Asks().Get(ctx, e.org, iv.ID); got.Status != ivStatus || deref(got.AnsweredBy) != by {
				t.Errorf("the request after the race: %s by %v", got.Status, got.AnsweredBy)
			}
			if n := countSteps(e.attempts(exID), "after"); n != after {
				t.Errorf("the step after the ask ran %d times", n)
			}
		}

		// An answer against the timeout.
		ex := e.start(wf, `{}`)
		iv := e.request(ex.ID)
		err := answerHeld(ex.ID, iv, func() {
			e.expire(iv, "expires_at")
			e.sweep() // or River's periodic sweep first: the clock jumped past its period
			if got, _ := e.eng.Asks().Get(ctx, e.org, iv.ID); got.Status != models.InterventionTimedOut {
				t.Errorf("the request after the sweep: %s, want timed out", got.Status)
			}
		})
		if apperr.ErrorCode(err) != apperr.ECONFLICT {
			t.Errorf("an answer after the timeout: %v, want a conflict", err)
		}
		settled(ex.ID, iv, models.ExecDLQPending, models.InterventionTimedOut, "", 0)

		// An answer against a cancel.
		ex = e.start(wf, `{}`)
		iv = e.request(ex.ID)
		err = answerHeld(ex.ID, iv, func() {
			if err := cancel(ex.ID); err != nil {
				t.Errorf("the cancel: %v", err)
			}
		})
		if apperr.ErrorCode(err) != apperr.ECONFLICT {
			t.Errorf("an answer after the cancel: %v, want a conflict", err)
		}
		settled(ex.ID, iv, models.ExecFailed, models.InterventionCancelled, "", 0)

		// A cancel against an answer.
		ex = e.start(wf, `{}`)
		iv = e.request(ex.ID)
		err = held(ex.ID, engine.TransitionCancel, func() error { return cancel(ex.ID) }, func() {
			if _, err := e.answer(iv, e.acc, models.RoleAccountant, approve); err != nil {
				t.Errorf("the answer: %v", err)
			}
		})
		if apperr.ErrorCode(err) != apperr.ECONFLICT {
			t.Errorf("a cancel after the answer: %v, want a conflict", err)
		}
		settled(ex.ID, iv, models.ExecSucceeded, models.InterventionAnswered, e.acc, 1)
	})
}
