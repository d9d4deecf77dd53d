package engine_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
	"lifeline/services/classify"
	"lifeline/services/outbound"
	"lifeline/services/steps"
)

// ksefStep is a step type an embedding program registers: it fails with its own
// classification the first time, then succeeds.
type ksefStep struct{ calls int }

func (k *ksefStep) Validate(config map[string]any) map[string]string {
	if _, ok := config["invoice"].(string); !ok {
		return map[string]string{"invoice": "is required"}
	}
	return nil
}

func (k *ksefStep) Run(_ context.Context, in steps.Input) (any, error) {
	k.calls++
	if k.calls == 1 {
		return nil, classify.New(classify.RateLimit, "KSEF_THROTTLED", "KSeF session limit reached")
	}
	return map[string]any{"ksefNumber": "KSEF-" + in.Config["invoice"].(string)}, nil
}

func TestCustomStepTypeAndSSRF(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		// No loopback allowed: the SSRF guard refuses local and metadata addresses.
		reg := steps.Builtins(outbound.NewClient(outbound.Options{Allow: []netip.Prefix{}}))
		reg.Register("ksef", &ksefStep{})
		h := newHarnessWith(t, db, reg)

		// A definition with an invalid config for the custom type is rejected with its message.
		_, err := h.wfs.Create(context.Background(), h.org, auditSystem, []byte(`{"name": "K", "steps": [{"id": "k", "type": "ksef", "config": {}}]}`))
		var me *apperr.Error
		if !errors.As(err, &me) || me.Fields["steps[0].config.invoice"] != "is required" {
			t.Fatalf("custom validation: %v", err)
		}
		wf := h.workflow(`{"name": "K", "settings": {"retryPolicy": {"initialDelayMs": 1000, "jitterRatio": 0}},
		  "steps": [{"id": "k", "type": "ksef", "config": {"invoice": "{{ input.no }}"}}]}`)
		ex := h.start(wf, `{"no": "FV/2026/10/7"}`)
		if got := h.wait(ex.ID, 20*time.Second); got.Status != models.ExecSucceeded {
			t.Fatalf("status %s", got.Status)
		}
		as := h.attempts(ex.ID)
		if len(as) != 2 || *as[0].ErrorType != "rate_limit" || *as[0].ErrorCode != "KSEF_THROTTLED" || !strings.Contains(string(as[1].Output), "KSEF-FV/2026/10/7") {
			t.Fatalf("attempts %+v", as)
		}

		// Cloud metadata is refused at dial time: permanent, no retry, straight to the DLQ.
		wf2 := h.workflow(`{"name": "Metadata", "steps": [{"id": "steal", "type": "http", "config": {"url": "http://169.254.169.254/latest/meta-data/"}}]}`)
		ex2 := h.start(wf2, `{}`)
		if got := h.wait(ex2.ID, 20*time.Second); got.Status != models.ExecDLQPending {
			t.Fatalf("status %s", got.Status)
		}
		as = h.attempts(ex2.ID)
		if len(as) != 1 || *as[0].ErrorType != "permanent" || *as[0].ErrorCode != "DESTINATION_DENIED" {
			t.Fatalf("metadata attempt: %+v", fmt.Sprint(*as[0].ErrorType, " ", *as[0].ErrorMessage))
		}
	})
}
