// Package executions builds the read side of executions for pages and the API: an
// execution with its definition, attempts, dead letter and rollback (Detail), the lists of
// executions, dead letters and breakers, and what a workflow's steps run under (retry
// policy, breakers). What it returns of an execution is masked as
// users may see it: inputs and outputs have the values under secret-looking keys redacted.
// It changes nothing; the engine and the other services own the writes.
package executions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/services/definition"
	"lifeline/services/redact"
	"lifeline/services/retry"
)

// Engine is what the read side asks the engine: the retry policy a step runs under and a
// rollback's compensations (*engine.Engine).
type Engine interface {
	LastAttempt(tx *gorm.DB, ex *models.Execution, def *definition.Definition, attempts []models.StepAttempt, a *models.StepAttempt) (int, error)
	Compensations(ctx context.Context, orgID, executionID string) ([]models.CompensationAction, error)
}

// errNoEngine answers what needs the engine when the service was made without one.
var errNoEngine = errors.New("executions: no engine")

// Service reads executions.
type Service struct {
	db  *models.DB
	eng Engine
	red *redact.Redactor
}

// New returns the service on db; eng resolves policies and compensations (nil: those
// answer an error), red masks inputs and outputs (the engine's, as its snapshots are).
func New(db *models.DB, eng Engine, red *redact.Redactor) *Service {
	return &Service{db: db, eng: eng, red: red}
}

// StepDetail is a definition step with its attempts (inputs and outputs masked).
type StepDetail struct {
	Step     definition.Step
	Index    int
	Attempts []models.StepAttempt
	// LastAttempt is the number of the last attempt its run may make ("attempt 2 of 5"), by
	// its effective retry policy; 0 when the step has no attempt yet or no engine says.
	LastAttempt int
}

// Status is the step's status: its latest attempt's; without one, NOT_RUN once the
// execution has finished (it ended before the step), else PENDING.
func (s StepDetail) Status(ex *models.Execution) string {
	switch {
	case len(s.Attempts) > 0:
		return s.Attempts[len(s.Attempts)-1].Status
	case ex.FinishedAt != nil:
		return models.StepNotRun
	}
	return models.StepPending
}

// Detail is an execution (its input masked) with its definition and attempts.
type Detail struct {
	Ex           *models.Execution
	WorkflowName string
	Def          *definition.Definition
	Steps        []StepDetail
	DLQ          *models.DeadLetter // its dead letter, when it failed
	RetriedAs    string             // a full retry of this execution, when there is one
	// Compensations of its rollback, in the order they run (none without a rollback).
	Compensations []models.CompensationAction
}

// Handoffs are the on-failure hand-overs of the execution: the step each handler that ran
// handled (handler id → failed step id), and the reverse (failed step id → handler id).
func (d *Detail) Handoffs() (handled, handedTo map[string]string) {
	owner := map[string]string{} // attempt id → its step id
	for _, sd := range d.Steps {
		for _, a := range sd.Attempts {
			owner[a.ID] = sd.Step.ID
		}
	}
	handled, handedTo = map[string]string{}, map[string]string{}
	for _, sd := range d.Steps {
		if n := len(sd.Attempts); sd.Step.Handler && n > 0 && sd.Attempts[n-1].HandlesAttemptID != nil {
			if d.fellBack(*sd.Attempts[n-1].HandlesAttemptID) {
				continue // a fallback: Fallbacks
			}
			failed := owner[*sd.Attempts[n-1].HandlesAttemptID]
			handled[sd.Step.ID], handedTo[failed] = failed, sd.Step.ID
		}
	}
	return handled, handedTo
}

// Fallbacks are the execution's fallbacks that ran (issue 22): the step each fallback stood
// in for while its breaker was open (fallback id → step id), and the reverse.
func (d *Detail) Fallbacks() (stoodFor, fellBackTo map[string]string) {
	owner := map[string]string{} // attempt id → its step id
	for _, sd := range d.Steps {
		for _, a := range sd.Attempts {
			owner[a.ID] = sd.Step.ID
		}
	}
	stoodFor, fellBackTo = map[string]string{}, map[string]string{}
	for _, sd := range d.Steps {
		if n := len(sd.Attempts); sd.Step.Handler && n > 0 && sd.Attempts[n-1].HandlesAttemptID != nil && d.fellBack(*sd.Attempts[n-1].HandlesAttemptID) {
			step := owner[*sd.Attempts[n-1].HandlesAttemptID]
			stoodFor[sd.Step.ID], fellBackTo[step] = step, sd.Step.ID
		}
	}
	return stoodFor, fellBackTo
}

// fellBack reports whether the attempt with id was refused by its open breaker and replaced
// by its step's fallback.
func (d *Detail) fellBack(id string) bool {
	for _, sd := range d.Steps {
		for _, a := range sd.Attempts {
			if a.ID == id {
				return a.ErrorCode != nil && *a.ErrorCode == models.ErrCodeFallback
			}
		}
	}
	return false
}

// HasUndo reports whether a completed step of the execution has a compensation to run: a
// rollback would undo something.
func (d *Detail) HasUndo() bool {
	for _, sd := range d.Steps {
		if sd.Step.Undoes() && sd.Status(d.Ex) == models.StepSucceeded {
			return true
		}
	}
	return false
}

// Detail reads an execution of the organization with everything its page shows. Errors:
// ENOTFOUND for another organization's or an unknown id; a definition that cannot be read
// is an internal error.
func (s *Service) Detail(ctx context.Context, orgID, id string) (*Detail, error) {
	ex, err := s.Execution(ctx, orgID, id)
	if err != nil {
		return nil, err
	}
	wf, err := s.db.GetWorkflow(ctx, orgID, ex.WorkflowID)
	if err != nil {
		return nil, err
	}
	raw, err := s.db.WorkflowVersionDef(ctx, orgID, ex.WorkflowID, ex.WorkflowVersion)
	if err != nil {
		return nil, err
	}
	var def definition.Definition
	if err := json.Unmarshal(raw, &def); err != nil {
		return nil, fmt.Errorf("definition of %s v%d: %w", ex.WorkflowID, ex.WorkflowVersion, err)
	}
	attempts, err := s.db.Attempts(ctx, orgID, ex.ID)
	if err != nil {
		return nil, err
	}
	d := &Detail{Ex: ex, WorkflowName: wf.Name, Def: &def}
	for i, st := range def.Steps {
		sd := StepDetail{Step: st, Index: i}
		for _, a := range attempts {
			if a.StepID == st.ID {
				a.Input, a.Output = s.mask(a.Input), s.mask(a.Output)
				sd.Attempts = append(sd.Attempts, a)
			}
		}
		if n := len(sd.Attempts); n > 0 && s.eng != nil {
			if sd.LastAttempt, err = s.eng.LastAttempt(s.db.Conn(ctx), ex, &def, attempts, &sd.Attempts[n-1]); err != nil {
				return nil, err
			}
		}
		d.Steps = append(d.Steps, sd)
	}
	if ex.Status == models.ExecDLQPending || ex.Status == models.ExecFailed {
		if d.DLQ, err = s.db.DLQForExecution(ctx, orgID, ex.ID); err != nil {
			return nil, err
		}
	}
	if ex.Status == models.ExecFailed {
		if d.RetriedAs, err = s.db.RetriedAs(ctx, orgID, ex.ID); err != nil {
			return nil, err
		}
	}
	if ex.RollbackStatus != nil {
		if s.eng == nil {
			return nil, errNoEngine
		}
		if d.Compensations, err = s.eng.Compensations(ctx, orgID, ex.ID); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// Execution reads an execution of the organization, its input masked. Errors: ENOTFOUND.
func (s *Service) Execution(ctx context.Context, orgID, id string) (*models.Execution, error) {
	ex, err := s.db.GetExecution(ctx, orgID, id)
	if err != nil {
		return nil, err
	}
	ex.Input = s.mask(ex.Input)
	return ex, nil
}

// Compensations returns the compensations of the rollback of the organization's execution
// id, in the order they run (none without a rollback; none for another organization's).
func (s *Service) Compensations(ctx context.Context, orgID, id string) ([]models.CompensationAction, error) {
	if s.eng == nil {
		return nil, errNoEngine
	}
	return s.eng.Compensations(ctx, orgID, id)
}

// Executions reads the named executions of the organization, their inputs masked, by id
// (others' and unknown ids are left out): what a list of requests shows of each.
func (s *Service) Executions(ctx context.Context, orgID string, ids []string) (map[string]*models.Execution, error) {
	out := make(map[string]*models.Execution, len(ids))
	for start := 0; start < len(ids); start += 500 {
		var rows []models.Execution
		if err := s.db.Conn(ctx).Where("organization_id = ? AND id IN ?", orgID, ids[start:min(start+500, len(ids))]).Find(&rows).Error; err != nil {
			return nil, err
		}
		for i := range rows {
			rows[i].Input = s.mask(rows[i].Input)
			out[rows[i].ID] = &rows[i]
		}
	}
	return out, nil
}

// SucceededAttempts are the succeeded attempts of the named executions of the organization,
// their inputs and outputs masked, by execution id in step order (others' and unknown ids
// are left out): what a list of requests shows of the steps before each.
func (s *Service) SucceededAttempts(ctx context.Context, orgID string, ids []string) (map[string][]models.StepAttempt, error) {
	out := make(map[string][]models.StepAttempt, len(ids))
	for start := 0; start < len(ids); start += 500 {
		var rows []models.StepAttempt
		if err := s.db.Conn(ctx).Where("organization_id = ? AND execution_id IN ? AND status = ?", orgID, ids[start:min(start+500, len(ids))], models.StepSucceeded).
			Order("step_index, attempt").Find(&rows).Error; err != nil {
			return nil, err
		}
		for _, a := range rows {
			a.Input, a.Output = s.mask(a.Input), s.mask(a.Output)
			out[a.ExecutionID] = append(out[a.ExecutionID], a)
		}
	}
	return out, nil
}

// List is a page of the organization's executions matching f, newest first, and the cursor
// of the next page ("" at the end). Errors: EINVALID for a cursor this server did not make.
func (s *Service) List(ctx context.Context, orgID string, f models.ExecutionFilter) ([]models.ExecutionRow, string, error) {
	return s.db.ListExecutions(ctx, orgID, f)
}

// PendingDeadLetters counts the organization's dead letters waiting for someone.
func (s *Service) PendingDeadLetters(ctx context.Context, orgID string) (int, error) {
	return s.db.CountDLQPending(ctx, orgID)
}

// DeadLetterBriefs are the named dead letters of the organization in brief, by id (ids of
// others' or unknown ones are left out).
func (s *Service) DeadLetterBriefs(ctx context.Context, orgID string, ids []string) (map[string]models.DLQBrief, error) {
	return s.db.DLQBriefs(ctx, orgID, ids)
}

// Policy is the retry policy a step of the workflow runs under (stepID "": the workflow's
// own), as the engine resolves it.
func (s *Service) Policy(ctx context.Context, orgID, workflowID, stepID string) (retry.Policy, error) {
	if s.eng == nil {
		return retry.Policy{}, errNoEngine
	}
	return policyOf(s.db.Conn(ctx), orgID, workflowID, stepID)
}

// Breakers are the breakers a workflow's steps go through that have a row: the steps' own
// and those of the hosts they call.
func (s *Service) Breakers(ctx context.Context, orgID, workflowID string, hosts []string) ([]models.CircuitBreaker, error) {
	return s.db.WorkflowBreakers(ctx, orgID, workflowID, hosts)
}

// Mask returns JSON with the values under secret-looking keys redacted, as users who may not
// see secrets are shown it (nil for none).
func (s *Service) Mask(j []byte) json.RawMessage {
	if len(j) == 0 {
		return nil
	}
	return json.RawMessage(s.red.JSON(j))
}

func (s *Service) mask(j models.JSON) models.JSON { return models.JSON(s.Mask(j)) }

// ListDLQ is a page of the organization's dead letters matching f and the next page's
// cursor ("" at the end). Errors: EINVALID for a cursor this server did not make.
func (s *Service) ListDLQ(ctx context.Context, orgID string, f models.DLQFilter) ([]models.DLQRow, string, error) {
	return s.db.ListDLQ(ctx, orgID, f)
}

// DLQStatusCounts counts the organization's dead letters in each status (above
// models.DLQCountCap: DLQCountCap+1, "more than").
func (s *Service) DLQStatusCounts(ctx context.Context, orgID string) (map[string]int, error) {
	return s.db.DLQStatusCounts(ctx, orgID)
}

// GetDLQ reads a dead letter of the organization with its error record. Errors: ENOTFOUND.
func (s *Service) GetDLQ(ctx context.Context, orgID, id string) (*models.DLQRow, error) {
	return s.db.GetDLQ(ctx, orgID, id)
}

// DLQForExecution reads an execution's dead letter. Errors: ENOTFOUND.
func (s *Service) DLQForExecution(ctx context.Context, orgID, executionID string) (*models.DeadLetter, error) {
	return s.db.DLQForExecution(ctx, orgID, executionID)
}

// ListBreakers lists the organization's breakers matching f with their counts.
func (s *Service) ListBreakers(ctx context.Context, orgID string, f models.BreakerFilter) ([]models.BreakerRow, error) {
	return s.db.ListBreakers(ctx, orgID, f)
}

// GetBreaker reads one breaker of the organization with its counts. Errors: ENOTFOUND.
func (s *Service) GetBreaker(ctx context.Context, orgID, id string) (*models.BreakerRow, error) {
	return s.db.GetBreaker(ctx, orgID, id)
}

// policyOf returns the effective retry policy of a step of the workflow's latest version as
// stored in retry_policies: the step's over the workflow's over the organization default
// over the built-in default. Executions use PolicyFor, the policy of their own version.
func policyOf(tx *gorm.DB, orgID, workflowID, stepID string) (retry.Policy, error) {
	var rows []models.RetryPolicy
	err := tx.Where("organization_id = ? AND ((workflow_id IS NULL AND step_id IS NULL) OR (workflow_id = ? AND (step_id IS NULL OR step_id = ?)))",
		orgID, workflowID, stepID).Find(&rows).Error
	if err != nil {
		return retry.Policy{}, err
	}
	var org, wf, st *retry.Spec
	for _, r := range rows {
		var s retry.Spec
		if err := json.Unmarshal(r.Spec, &s); err != nil {
			return retry.Policy{}, fmt.Errorf("retry policy %s: %w", r.ID, err)
		}
		switch {
		case r.WorkflowID == nil:
			org = &s
		case r.StepID == nil:
			wf = &s
		default:
			st = &s
		}
	}
	return retry.ResolveLevels(org, wf, st), nil
}
