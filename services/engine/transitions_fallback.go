package engine

import (
	"lifeline/models"
	"lifeline/services/classify"
)

// fallingBack is what FallBack records on the attempt its open breaker refused.
type fallingBack struct {
	input     []byte // what the step would have been sent (sealed)
	message   string
	breakerID string
}

// FallBack ends the attempt RUNNING at generation, which its open circuit breaker refused,
// FAILED without a request (external_service, CodeFallback, fb.message; no lease, no wait),
// creates f, the first attempt of the step's fallback (PENDING, naming it), and shows the
// fallback as the execution's current step. errLost when the attempt is no longer RUNNING at
// generation: nothing is written (f is not created).
func (s stateTx) FallBack(a *models.StepAttempt, generation int, fb fallingBack, f *models.StepAttempt) error {
	if err := s.FinishAttempt(a, generation, models.StepFailed, map[string]any{"input": models.JSON(fb.input),
		"error_type": string(classify.ExternalService), "error_code": CodeFallback, "error_message": fb.message,
		"lease_expires_at": nil, "next_retry_at": nil, "waiting_breaker_id": nil}); err != nil {
		return err
	}
	f.CreatedAt, f.UpdatedAt = s.now, s.now
	if err := s.tx.Create(f).Error; err != nil {
		return err
	}
	return s.ShowStep(a.ExecutionID, f.StepID)
}
