package engine

import (
	"lifeline/models"
	"lifeline/services/redact"
)

// The engine's parts, each responsible for one thing; Engine is their façade. Every part
// shares core (its dependencies) and holds the few other parts it hands work to.

// starts starts executions (Start): the execution, its first attempt and that attempt's job.
type starts struct{ *core }

// attempts runs attempts (RunAttempt): the claim, the step, the result recorded (success,
// retry, hand-back, waiting on a breaker), and the steps that chain in the same worker.
type attempts struct {
	*core
	failures *failures
	circuits *circuits
}

// failures settles a step that failed for good: its on-failure handler step, or the
// dead-letter queue (and the rollback the workflow asks for).
type failures struct {
	*core
	rollbacks *rollbacks
}

// recovery acts on dead letters: replays (in place, from a step, skipping the failed step,
// or a full retry) and settling by hand.
type recovery struct {
	*core
	starts *starts
}

// rollbacks undoes the completed steps of a failed execution: the rollback, its
// compensations, and an admin's actions on them.
type rollbacks struct{ *core }

// circuits keeps the circuit breakers' state on the step path: admitting an attempt, counting
// its failure, trials, and an admin's reset or forced opening.
type circuits struct{ *core }

// maintenance keeps the engine's data sound in the background: the reconciler (reclaims,
// re-queues, compensation repair, quarantine), recovery after an outage, retention (with
// the repair of failure groups' counts), and re-sealing secrets under a new key.
type maintenance struct {
	*core
	failures *failures
	attempts *attempts
}

// secrets seals and masks secret values (masking.go, seal.go).
type secrets struct {
	redactor *redact.Redactor
	// sealer encrypts secret values at rest (nil: they are stored as they are).
	sealer models.Sealer
}
