package engine

import (
	"context"
	"fmt"
	"reflect"

	"lifeline/models"
	"lifeline/services/definition"
	"lifeline/services/redact"
)

// env is what templates see at step index: input, the outputs of the succeeded (or skipped)
// steps before it, the execution, and the organization's credentials by name as they are now
// (an admin's replaced token serves the next attempt). (A replay from an earlier step leaves
// outputs of later steps from the first run in attempts; they are not the replay's.) Secret
// values are decrypted here, in memory only; credentialsOf(env) lists the credentials'
// values for the masker. The credentials are read only when withCredentials (a definition
// that never names them costs no query per step).
func (e *core) env(ctx context.Context, ex *models.Execution, attempts []models.StepAttempt, index int, withCredentials bool) (map[string]any, error) {
	input, err := e.open(ex.Input, tableExecutions, ex.ID, "input")
	if err != nil {
		return nil, err
	}
	byName := map[string]any{}
	if withCredentials {
		creds, err := e.db.Credentials(ctx, ex.OrganizationID)
		if err != nil {
			return nil, fmt.Errorf("credentials: %w", err)
		}
		for _, c := range creds {
			byName[c.Name] = c.Value
		}
	}
	env := map[string]any{
		"input":       input,
		"steps":       map[string]any{},
		"execution":   map[string]any{"id": ex.ID, "correlationId": ex.CorrelationID, "workflowId": ex.WorkflowID},
		"credentials": byName,
	}
	for _, at := range attempts {
		if at.StepIndex >= index {
			continue
		}
		if err := e.addOutput(env, at); err != nil {
			return nil, err
		}
	}
	for _, at := range attempts {
		if err := e.standIn(env, at, attempts, index); err != nil {
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

// credentialValues are secrets by value (the organization's credentials): the masker finds
// and masks each wherever it appears, whatever key it went under.
type credentialValues []string

// credentialsOf returns the values of env's credentials.
func credentialsOf(env map[string]any) credentialValues {
	byName, _ := env["credentials"].(map[string]any)
	out := make(credentialValues, 0, len(byName))
	for _, v := range byName {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// chainEnv is what templates see while a worker runs steps of one execution in a row (built
// at the first step, extended after each), with the secret values found so far in it and in
// the definition: each step's masker needs them all, and walking every earlier output again
// at every step cost the step path more than its own work. A step's entry is walked once
// (again only if it is replaced by another map); the union is what walking the whole env
// finds, since a value's secrecy depends only on the keys above it.
type chainEnv struct {
	env map[string]any
	// def's literal secrets, found once per chain.
	defFound []string
	defDone  bool
	// found are the secret values of env's input and of the steps' entries walked (by step
	// id, the entry's map).
	found       []string
	inputWalked bool
	walked      map[string]uintptr
}

// drop forgets env and what was found in it (it is built again from the attempts).
func (c *chainEnv) drop() {
	c.env, c.found, c.inputWalked, c.walked = nil, nil, false, nil
}

// secrets returns the secret values of def and of env's input and steps (knownSecrets: the
// masker takes each as a whole), walking only what it has not walked yet.
func (c *chainEnv) secrets(r *redact.Redactor, def *definition.Definition) knownSecrets {
	if !c.defDone {
		c.defFound, c.defDone = defSecrets(r, def), true
	}
	if !c.inputWalked {
		c.found = append(c.found, r.SecretValues(c.env["input"])...)
		c.inputWalked = true
	}
	steps, _ := c.env["steps"].(map[string]any)
	for id, entry := range steps {
		var p uintptr // 0: not a map (never so), walked every time
		if m, ok := entry.(map[string]any); ok {
			p = reflect.ValueOf(m).Pointer()
		}
		if w, ok := c.walked[id]; ok && w == p && p != 0 {
			continue
		}
		if c.walked == nil {
			c.walked = map[string]uintptr{}
		}
		c.walked[id] = p
		c.found = append(c.found, r.SecretValues(map[string]any{id: entry})...)
	}
	out := make(knownSecrets, 0, len(c.defFound)+len(c.found))
	return append(append(out, c.defFound...), c.found...)
}
