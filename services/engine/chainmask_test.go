package engine_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/classify"
	"lifeline/services/outbound"
	"lifeline/services/steps"
)

// leakStep fails with its configuration's value in its message, as a careless service
// echoes what it was sent.
type leakStep struct{}

func (leakStep) Validate(map[string]any) map[string]string { return nil }

func (leakStep) Run(_ context.Context, in steps.Input) (any, error) {
	return nil, classify.New(classify.Validation, "LEAK", "refused "+in.Config["value"].(string))
}

// A worker that runs an execution's steps in a row finds the secrets of every earlier step's
// output (and of the input) for each step's masker, though it walks each output once: a
// secret from the first step's output, sent by the third step under a plain key, is masked
// in the third step's error, as is the input's.
func TestChainMasksEarlierOutputs(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		reg := steps.Builtins(outbound.NewClient(outbound.Options{Allow: []netip.Prefix{}}))
		reg.Register("leak", leakStep{})
		h := newHarnessWith(t, db, reg)
		wf := h.workflow(`{"name": "Leak", "steps": [
		  {"id": "login", "type": "transform", "config": {"output": {"apiToken": "tok-{{ input.n }}-sekret"}}},
		  {"id": "middle", "type": "transform", "config": {"output": {"ok": true}}},
		  {"id": "send", "type": "leak", "config": {"value": "{{ steps.login.output.apiToken }} {{ input.password }}"}}]}`)
		ex := h.start(wf, `{"n": "7781", "password": "hasło-wejściowe"}`)
		if got := h.wait(ex.ID, 20*time.Second); got.Status != models.ExecDLQPending {
			t.Fatalf("status %s", got.Status)
		}
		as := h.attempts(ex.ID)
		last := as[len(as)-1]
		if last.StepID != "send" || last.ErrorMessage == nil {
			t.Fatalf("last attempt %+v", last)
		}
		msg := *last.ErrorMessage
		if strings.Contains(msg, "tok-7781-sekret") || strings.Contains(msg, "hasło-wejściowe") || strings.Count(msg, "[REDACTED]") != 2 {
			t.Fatalf("error message %q: want both secrets masked", msg)
		}
	})
}
