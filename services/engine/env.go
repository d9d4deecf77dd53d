package engine

import (
	"lifeline/models"
)

// env is what templates see at step index: input, the outputs of the succeeded (or skipped)
// steps before it, the execution. (A replay from an earlier step leaves outputs of later
// steps from the first run in attempts; they are not the replay's.) Secret values are
// decrypted here, in memory only.
func (e *core) env(ex *models.Execution, attempts []models.StepAttempt, index int) (map[string]any, error) {
	input, err := e.open(ex.Input, tableExecutions, ex.ID, "input")
	if err != nil {
		return nil, err
	}
	env := map[string]any{
		"input":     input,
		"steps":     map[string]any{},
		"execution": map[string]any{"id": ex.ID, "correlationId": ex.CorrelationID, "workflowId": ex.WorkflowID},
	}
	for _, at := range attempts {
		if at.StepIndex >= index {
			continue
		}
		if err := e.addOutput(env, at); err != nil {
			return nil, err
		}
	}
	return env, nil
}

// addOutput adds a succeeded or skipped attempt's output to env (other attempts add nothing).
func (e *core) addOutput(env map[string]any, at models.StepAttempt) error {
	if at.Status != models.StepSucceeded && at.Status != models.StepSkipped {
		return nil
	}
	out, err := e.open(at.Output, tableAttempts, at.ID, "output")
	if err != nil {
		return err
	}
	env["steps"].(map[string]any)[at.StepID] = map[string]any{"output": out, "status": at.Status, "attempt": at.Attempt}
	return nil
}
