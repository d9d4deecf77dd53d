package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/classify"
	"lifeline/services/dbconn"
	"lifeline/services/definition"
	"lifeline/services/notify"
	"lifeline/services/redact"
	"lifeline/services/retry"
	"lifeline/services/steps"
	"lifeline/services/tmpl"
)

// DatabaseExecutor runs one parameterized statement on a database connection an admin
// configured by name (the database_operation compensation), exactly once per
// Statement.Key: a run that finds its key committed in the target database does not run the
// statement again and answers with the rows the committed run affected (Result.Replayed).
type DatabaseExecutor interface {
	Exec(ctx context.Context, orgID string, st dbconn.Statement) (dbconn.Result, error)
}

// compensationPolicy is a compensation's retry policy without one of its own.
var compensationPolicy = func() *retry.Spec {
	n, d, m := 3, 5000, 2.0
	return &retry.Spec{MaxRetries: &n, InitialDelayMs: &d, BackoffMultiplier: &m}
}()

// RunCompensation does what Engine.RunCompensation says.
func (e *rollbacks) RunCompensation(ctx context.Context, id string, generation int) error {
	var c models.CompensationAction
	if err := e.db.Conn(ctx).Where("id = ?", id).First(&c).Error; err != nil {
		if models.IsNotFound(err) {
			return nil
		}
		return err
	}
	if c.Status == nil || *c.Status != models.CompPending || c.Generation != generation || c.ExecutionID == nil {
		return nil
	}
	comp, err := e.compensationOf(&c)
	if err != nil {
		return err
	}
	timeout := compensationTimeout(comp)
	now, err := e.now(ctx)
	if err != nil {
		return err
	}
	if comp.CompensationType == definition.CompManual {
		return e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
			_, err := (stateTx{tx: tx, now: now}).AwaitConfirmation(&c, generation)
			return nil, err
		})
	}
	if claimed, err := e.store.ClaimCompensation(ctx, &c, generation, timeout+e.cfg.LeaseGrace, now); err != nil || !claimed {
		return err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	// Read before the transaction that records the result (SQLite has one connection).
	var ex models.Execution
	if err := e.db.Conn(rctx).Where("id = ?", *c.ExecutionID).First(&ex).Error; err != nil {
		return err
	}
	def, err := e.definitionFor(rctx, ex.OrganizationID, ex.WorkflowID, ex.WorkflowVersion)
	if err != nil {
		return err
	}
	result, mask, runErr := e.compensate(ctx, &ex, &c, comp)
	if mask == nil {
		mask = e.masker(def)
	}
	if runErr != nil && ctx.Err() != nil { // shutdown: run it again later, with the same key
		_, err := e.store.ReleaseCompensation(rctx, &c, generation, now)
		return err
	}
	return e.commit(rctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		jobs, err := e.recordCompensation(stateTx{tx: tx, now: now}, &c, comp, compensationResult{result, runErr, mask}, def.Settings.RollbackStopOnFailure)
		if err != nil || runErr != nil || comp.CompensationType != definition.CompNotify {
			return jobs, err
		}
		// A notification compensation's message goes out through the notification channels.
		msg, _ := result.(map[string]any)["message"].(string)
		msg = mask.Mask(msg)
		return jobs, e.emit(tx, notify.Event{Kind: notify.Compensation, OrganizationID: ex.OrganizationID, WorkflowID: ex.WorkflowID,
			WorkflowName: def.Name, ExecutionID: ex.ID, Subject: deref(ex.Subject), StepID: c.StepID, Message: msg,
			Settings: def.Settings.ErrorNotifications, At: now, DedupKey: "compensation:" + c.ID})
	})
}

// compensate runs one compensation (not manual) and returns what it produced, and the
// masker of every secret it could see (nil when it failed before it rendered its config).
func (e *rollbacks) compensate(ctx context.Context, ex *models.Execution, c *models.CompensationAction, comp definition.Compensation) (any, *redact.Masker, error) {
	if comp.CompensationType == definition.CompNone {
		return nil, nil, nil
	}
	attempts, err := e.db.Attempts(ctx, ex.OrganizationID, ex.ID)
	if err != nil {
		return nil, nil, err
	}
	env, err := e.env(ctx, ex, attempts, 1<<30, true)
	if err != nil {
		return nil, nil, classify.New(classify.Internal, "DECRYPT", err.Error())
	}
	if st, ok := env["steps"].(map[string]any)[c.StepID].(map[string]any); ok {
		env["step"] = st
	} else {
		env["step"] = map[string]any{"output": nil}
	}
	cfgAny, err := tmpl.Render(comp.Templated(), env)
	if err != nil {
		return nil, nil, classify.New(classify.Validation, "TEMPLATE", err.Error())
	}
	cfg, _ := cfgAny.(map[string]any)
	mask := e.masker(nil, comp.Config, env["input"], env["steps"], cfgAny, credentialsOf(env))
	out, err := e.runCompensation(ctx, ex, c, comp, cfg)
	return out, mask, err
}

// runCompensation runs one compensation with its rendered config.
func (e *rollbacks) runCompensation(ctx context.Context, ex *models.Execution, c *models.CompensationAction, comp definition.Compensation, cfg map[string]any) (any, error) {
	timeout := compensationTimeout(comp)
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch comp.CompensationType {
	case definition.CompAPICall:
		t, ok := e.steps.Get("http")
		if !ok {
			return nil, classify.New(classify.Permanent, "STEP_TYPE", "the http step type is not registered in this process")
		}
		endpoint, _ := definition.ConfigString(cfg, definition.EndpointKeys)
		in := map[string]any{"url": endpoint, "method": upperOr(cfg["method"], "POST")}
		for _, k := range []string{"headers", "body"} {
			if v, ok := cfg[k]; ok && v != nil {
				in[k] = v
			}
		}
		return safeRun(rctx, t, steps.Input{ExecutionID: ex.ID, StepID: c.StepID, Attempt: c.Attempts, IdempotencyKey: *c.IdempotencyKey, Config: in})
	case definition.CompDatabase:
		if e.databases == nil {
			return nil, classify.New(classify.Permanent, "NO_DATABASES", "database connections are not available in this process")
		}
		conn, _ := comp.Config["connection"].(string)
		stmt, _ := definition.ConfigString(comp.Config, definition.SQLKeys)
		params, _ := cfg["params"].([]any)
		// The compensation key makes the statement run once, however often the compensation
		// does (a crash after the commit, a lost answer, a lease that ran out).
		res, err := e.databases.Exec(rctx, ex.OrganizationID, dbconn.Statement{Connection: conn, SQL: stmt, Args: params, Timeout: timeout,
			Key: *c.IdempotencyKey})
		if err != nil {
			return nil, err
		}
		if res.Replayed {
			return map[string]any{"rowsAffected": res.RowsAffected, "replayed": true}, nil
		}
		return map[string]any{"rowsAffected": res.RowsAffected}, nil
	case definition.CompNotify:
		msg, _ := definition.ConfigString(cfg, definition.MessageKeys)
		// Emitted to the notification channels when the result is recorded (RunCompensation).
		return map[string]any{"message": msg, "notification": "queued"}, nil
	}
	return nil, classify.New(classify.Permanent, "COMPENSATION_TYPE", fmt.Sprintf("unknown compensation type %q", comp.CompensationType))
}

// compensationResult is what one try of a compensation produced: its value or error, and the
// masker of every secret it could see.
type compensationResult struct {
	value any
	err   error
	mask  *redact.Masker
}

// recordCompensation stores a compensation's result in tx: completed; or failed, retried on
// its policy or failed for good; then the next compensation (none when a failure stops the
// rollback).
func (e *rollbacks) recordCompensation(st stateTx, c *models.CompensationAction, comp definition.Compensation, res compensationResult,
	stopOnFailure bool) ([]Job, error) {
	tx, now, generation, result, runErr, mask := st.tx, st.now, c.Generation, res.value, res.err, res.mask
	if runErr == nil {
		out, _ := json.Marshal(result)
		won, err := st.FinishCompensation(c, generation, models.CompCompleted, map[string]any{"result": models.JSON(mask.JSON(e.redactor.JSON(out))),
			"error_type": nil, "error_message": nil, "executed_at": now})
		if err != nil || !won {
			return nil, err
		}
		if err := compensationEntry(st, c, "compensation.completed", audit.System, nil); err != nil {
			return nil, err
		}
		return e.nextCompensation(tx, c.OrganizationID, *c.ExecutionID, c.Position, now)
	}
	cl := classify.Classify(runErr)
	var he *classify.HTTPError
	if errors.As(runErr, &he) {
		cl.Message = he.Reason()
	}
	msg := cleanText(e.maskText(cl.Message, mask), maxErrorMessage)
	policy := retry.ResolveLevels(compensationPolicy, comp.RetryPolicy)
	decision := policy.Decide(cl.Type, c.Attempts-1, true, 0)
	if neverRetried[cl.Code] {
		decision.Retry = false
	}
	upd := map[string]any{"error_type": string(cl.Type), "error_message": msg}
	if decision.Retry {
		at := now.Add(policy.Delay(c.Attempts, e.Rand))
		upd["scheduled_at"] = at
		if won, err := st.FinishCompensation(c, generation, models.CompPending, upd); err != nil || !won {
			return nil, err
		}
		return []Job{{CompensationID: c.ID, Generation: generation + 1, RunAt: at}}, nil
	}
	if won, err := st.FinishCompensation(c, generation, models.CompFailed, upd); err != nil || !won {
		return nil, err
	}
	if err := compensationEntry(st, c, "compensation.failed", audit.System, map[string]any{"errorType": cl.Type, "message": msg}); err != nil {
		return nil, err
	}
	if stopOnFailure {
		return nil, e.finishRollback(tx, c.OrganizationID, *c.ExecutionID, now)
	}
	return e.nextCompensation(tx, c.OrganizationID, *c.ExecutionID, c.Position, now)
}

// CompensationAction is an admin's action on one compensation.
type CompensationAction struct {
	OrganizationID string
	CompensationID string
	// Action: "retry" (a failed one runs again), "skip" (a failed or waiting one is passed
	// over), "confirm" (a manual one was done).
	Action string
	Actor  audit.Actor
}

// ActOnCompensation does what Engine.ActOnCompensation says.
func (e *rollbacks) ActOnCompensation(ctx context.Context, r CompensationAction) error {
	if compensationFrom[r.Action] == nil {
		return apperr.Invalid("compensation.action", map[string]string{"action": "must be retry, skip or confirm"})
	}
	return e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		var c models.CompensationAction
		if err := tx.Where("organization_id = ? AND id = ?", r.OrganizationID, r.CompensationID).First(&c).Error; err != nil {
			if models.IsNotFound(err) {
				return nil, apperr.NotFound("compensation")
			}
			return nil, err
		}
		var by *string
		if r.Actor.Type == audit.ActorUser && r.Actor.ID != "" {
			by = &r.Actor.ID
		}
		st := stateTx{tx: tx, now: now}
		won, err := st.ActOnCompensation(&c, r.Action, by)
		if err != nil {
			return nil, err
		}
		if !won {
			return nil, &apperr.Error{Code: apperr.ECONFLICT, Message: "compensation.conflict"}
		}
		if err := compensationEntry(st, &c, "compensation."+map[string]string{"retry": "retried", "skip": "skipped", "confirm": "confirmed"}[r.Action],
			r.Actor, nil); err != nil {
			return nil, err
		}
		if _, err := st.ResumeRollback(*c.ExecutionID); err != nil {
			return nil, err
		}
		if r.Action == "retry" {
			return []Job{{CompensationID: c.ID, Generation: c.Generation + 1, RunAt: now}}, nil
		}
		var running int64
		if err := tx.Model(&models.CompensationAction{}).Where("execution_id = ? AND status IN ?", *c.ExecutionID,
			[]string{models.CompRunning, models.CompWaiting}).Count(&running).Error; err != nil {
			return nil, err
		}
		if running > 0 {
			return nil, nil
		}
		return e.nextCompensation(tx, c.OrganizationID, *c.ExecutionID, c.Position, now)
	})
}

// Compensations does what Engine.Compensations says.
func (e *rollbacks) Compensations(ctx context.Context, orgID, executionID string) ([]models.CompensationAction, error) {
	var out []models.CompensationAction
	err := e.db.Conn(ctx).Where("organization_id = ? AND execution_id = ?", orgID, executionID).Order("position").Find(&out).Error
	return out, err
}

func compensationTimeout(c definition.Compensation) time.Duration {
	if ms, ok := c.Config["timeoutMs"].(float64); ok && ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return 30 * time.Second
}

func compensationEntry(st stateTx, c *models.CompensationAction, action string, actor audit.Actor, extra map[string]any) error {
	tx, at := st.tx, st.now
	d := map[string]any{"executionId": deref(c.ExecutionID), "stepId": c.StepID, "type": c.CompensationType, "position": c.Position}
	for k, v := range extra {
		d[k] = v
	}
	return audit.Record(tx, audit.Entry{OrganizationID: c.OrganizationID, Actor: actor, Action: action, EntityType: "compensation_action",
		EntityID: c.ID, At: at, Details: d})
}

// upperOr is v in capitals when it is a non-blank string, else fallback.
func upperOr(v any, fallback string) any {
	if s, ok := v.(string); ok && strings.TrimSpace(s) != "" {
		return strings.ToUpper(s)
	}
	return fallback
}

// compensationOf decodes a compensation's stored configuration (sealed: its secrets are
// opened in memory).
func (e *rollbacks) compensationOf(c *models.CompensationAction) (definition.Compensation, error) {
	var comp definition.Compensation
	raw, err := e.openRaw(c.CompensationConfig, tableCompensations, c.ID, "compensation_config")
	if err != nil {
		return comp, err
	}
	if err := json.Unmarshal(raw, &comp); err != nil {
		return comp, fmt.Errorf("compensation %s: %w", c.ID, err)
	}
	return comp, nil
}
