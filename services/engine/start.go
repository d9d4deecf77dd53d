package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/deadline"
	"lifeline/services/definition"
	"lifeline/services/redact"
	"lifeline/services/tmpl"
)

// Triggers.
const (
	TriggerUI      = "ui"
	TriggerAPI     = "api"
	TriggerWebhook = "webhook"
	TriggerDemo    = "demo"
	TriggerRetry   = "retry"
)

// StartRequest asks for a new execution.
type StartRequest struct {
	OrganizationID string
	WorkflowID     string
	// Input must be a JSON object.
	Input   []byte
	Trigger string
	Actor   audit.Actor
	// IdempotencyKey, when set, makes the request idempotent for Config.IdempotencyTTL:
	// the same key with the same input returns the first execution again; with a
	// different input it is an EINVALID error.
	IdempotencyKey string
}

// Start does what Engine.Start says.
func (e *starts) Start(ctx context.Context, r StartRequest) (*models.Execution, bool, error) {
	input, err := normalizeInput(r.Input)
	if err != nil {
		return nil, false, err
	}
	if len(r.IdempotencyKey) > 255 {
		return nil, false, apperr.Invalid("The Idempotency-Key is too long.", map[string]string{"Idempotency-Key": "must be at most 255 characters"})
	}
	for attempt := 0; ; attempt++ {
		ex, replayed, err := e.start(ctx, r, input)
		if err != nil && r.IdempotencyKey != "" && attempt == 0 && models.IsUniqueViolation(err) {
			continue // a concurrent request with the same key won; replay it
		}
		return ex, replayed, err
	}
}

func (e *starts) start(ctx context.Context, r StartRequest, input []byte) (*models.Execution, bool, error) {
	var ex models.Execution
	replayed := false
	hash := sha256.Sum256(input)
	reqHash := hex.EncodeToString(hash[:])
	// Read the workflow and its definition before the transaction: on SQLite the
	// transaction holds the only connection.
	wf, err := e.db.GetWorkflow(ctx, r.OrganizationID, r.WorkflowID)
	if err != nil {
		return nil, false, err
	}
	def, err := e.definitionFor(ctx, wf.OrganizationID, wf.ID, wf.Version)
	if err != nil {
		return nil, false, err
	}
	rules, err := deadlineSettings(e.db.Conn(ctx), def, wf.OrganizationID)
	if err != nil {
		return nil, false, err
	}
	fresh, err := e.newExecution(wf, def, r, input, rules)
	if err != nil {
		return nil, false, err
	}
	if r.IdempotencyKey == "" && e.db.Dialect == models.Postgres {
		return e.startOne(ctx, fresh, def, r)
	}
	err = e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		if r.IdempotencyKey != "" {
			var k models.IdempotencyKey
			err := tx.Where("organization_id = ? AND workflow_id = ? AND idem_key = ?", r.OrganizationID, r.WorkflowID, r.IdempotencyKey).First(&k).Error
			switch {
			case err == nil && k.ExpiresAt.After(now):
				if k.RequestHash != reqHash {
					return nil, apperr.Invalid("This Idempotency-Key was already used with a different request body.",
						map[string]string{"Idempotency-Key": "was already used with a different request body; use a new key"})
				}
				replayed = true
				return nil, tx.Where("organization_id = ? AND id = ?", r.OrganizationID, k.ExecutionID).First(&ex).Error
			case err == nil:
				if err := tx.Delete(&k).Error; err != nil {
					return nil, err
				}
			case !models.IsNotFound(err):
				return nil, err
			}
		}
		ex = fresh
		ex.CreatedAt, ex.UpdatedAt = now, now
		fi := def.First()
		first := def.Steps[fi]
		if err := models.CreateExecution(tx, &ex); err != nil {
			return nil, err
		}
		a := newAttempt(&ex, first, fi, 1, e.scheduleFor(first, now))
		if err := models.CreateAttempt(tx, &a); err != nil {
			return nil, err
		}
		if r.IdempotencyKey != "" {
			k := models.IdempotencyKey{OrganizationID: ex.OrganizationID, WorkflowID: ex.WorkflowID, IdemKey: r.IdempotencyKey,
				RequestHash: reqHash, ExecutionID: ex.ID, CreatedAt: now, ExpiresAt: now.Add(e.cfg.IdempotencyTTL)}
			if err := tx.Create(&k).Error; err != nil {
				return nil, err
			}
		}
		if err := audit.Record(tx, startedEntry(&ex, r.Actor, now)); err != nil {
			return nil, err
		}
		return []Job{{AttemptID: a.ID, Generation: a.Generation, RunAt: a.ScheduledAt}}, nil
	})
	if err != nil {
		return nil, false, err
	}
	if !replayed {
		e.logStarted(ctx, &ex)
	}
	return &ex, replayed, nil
}

func (e *starts) logStarted(ctx context.Context, ex *models.Execution) {
	e.log.InfoContext(ctx, "execution started", "execution_id", ex.ID, "correlation_id", ex.CorrelationID,
		"workflow_id", ex.WorkflowID, "trigger", ex.TriggerType)
}

// deadlineSettings are the organization's rules def's due dates depend on: read only when
// def names an obligation (no query for other workflows).
func deadlineSettings(tx *gorm.DB, def *definition.Definition, orgID string) (deadline.Settings, error) {
	if def.Settings.Obligation == "" {
		return deadline.Settings{}, nil
	}
	r, err := models.DeadlineRulesTx(tx, orgID)
	if err != nil {
		return deadline.Settings{}, fmt.Errorf("deadline rules: %w", err)
	}
	return deadline.Settings{ZUSDay: r.ZUSDay}, nil
}

// newExecution builds the PENDING execution of a start, its input sealed, and what it is
// about rendered from the workflow's settings (a value of the wrong kind is EINVALID naming
// its field); the caller sets its times from the database clock.
func (e *starts) newExecution(wf *models.Workflow, def *definition.Definition, r StartRequest, input []byte, rules deadline.Settings) (models.Execution, error) {
	id := models.NewID()
	// One masker for the input's secrets: it seals them, and keeps them out of the subject
	// and the search text.
	var in any
	if json.Unmarshal(input, &in) != nil {
		in = nil
	}
	m := e.masker(def, in)
	sealed, err := e.sealFound(input, tableExecutions, id, "input", m)
	if err != nil {
		return models.Execution{}, err
	}
	ex := models.Execution{
		ID:              id,
		OrganizationID:  wf.OrganizationID,
		WorkflowID:      wf.ID,
		WorkflowVersion: wf.Version,
		Status:          models.ExecPending,
		Input:           models.JSON(sealed),
		TriggerType:     r.Trigger,
		CorrelationID:   strings.ReplaceAll(models.NewID(), "-", "")[:16],
		CurrentStepID:   &def.Steps[def.First()].ID,
		Subject:         e.subject(def, in, m),
	}
	ex.SearchText = e.searchText(in, ex.Subject, m)
	facts, errs := def.Settings.About.Render(in, rules)
	if errs != nil {
		return models.Execution{}, apperr.Invalid("input.about", errs)
	}
	ex.Client, ex.Period, ex.Obligation, ex.AmountMinor, ex.Currency = facts.Client, facts.Period, facts.Obligation, facts.AmountMinor, facts.Currency
	if facts.Due != nil {
		d := facts.Due.Format(time.DateOnly)
		ex.DueOn = &d
	}
	if ex.TriggerType == "" {
		ex.TriggerType = TriggerAPI
	}
	if r.Actor.Type == audit.ActorUser && r.Actor.ID != "" {
		id := r.Actor.ID
		ex.CreatedBy = &id
	}
	return ex, nil
}

// startedEntry is the audit event of a start.
func startedEntry(ex *models.Execution, actor audit.Actor, at time.Time) audit.Entry {
	return audit.Entry{OrganizationID: ex.OrganizationID, Actor: actor, Action: "execution.started",
		EntityType: "workflow_execution", EntityID: ex.ID, At: at,
		Details: map[string]any{"workflowId": ex.WorkflowID, "version": ex.WorkflowVersion, "trigger": ex.TriggerType}}
}

// startOne starts an execution without an idempotency key on PostgreSQL in one statement
// (the execution, its first attempt and the audit event), committed with the attempt's job
// in a group commit. What it writes is what start's transaction writes.
func (e *starts) startOne(ctx context.Context, ex models.Execution, def *definition.Definition, r StartRequest) (*models.Execution, bool, error) {
	fi := def.First()
	first := def.Steps[fi]
	a := newAttempt(&ex, first, fi, 1, time.Time{})
	delay := e.delayOf(first)
	au := audit.Row(startedEntry(&ex, r.Actor, time.Time{}))
	const q = `WITH ex AS (
  INSERT INTO workflow_executions (id, organization_id, workflow_id, workflow_version, status, input, trigger_type, correlation_id,
    current_step_id, created_by, subject, search_text, client, period, obligation, due_on, amount_minor, currency, created_at, updated_at)
  VALUES (@id, @org, @wf, @version, @status, @input, @trigger, @corr, @step, @by, @subject, @search,
    @client, @period, @obligation, @due, @amount, @currency, now(), now())
  RETURNING id),
at AS (
  INSERT INTO step_executions (id, organization_id, execution_id, step_id, step_index, attempt, status, generation, reclaims,
    idempotency_key, scheduled_at, created_at, updated_at)
  SELECT @aid, @org, id, @step, @aidx, 1, @astatus, 1, 0, @key, now() + make_interval(secs => @delay), now(), now() FROM ex),
au AS (
  INSERT INTO audit_log (id, organization_id, actor_type, actor_id, action, entity_type, entity_id, details, created_at)
  SELECT @auid, @org, @actortype, @actor, @action, @entitytype, id, @details, now() FROM ex)
SELECT now()`
	var now time.Time
	// The first attempt's job commits with it.
	jobs := func() []Job { return []Job{{AttemptID: a.ID, Generation: a.Generation, RunAt: now.UTC().Add(delay)}} }
	err := e.group.queryRowJobs(ctx, q, pgx.NamedArgs{
		"id": ex.ID, "org": ex.OrganizationID, "wf": ex.WorkflowID, "version": ex.WorkflowVersion, "status": ex.Status,
		"input": ex.Input, "trigger": ex.TriggerType, "corr": ex.CorrelationID, "step": first.ID, "by": ex.CreatedBy, "subject": ex.Subject, "search": ex.SearchText,
		"client": ex.Client, "period": ex.Period, "obligation": ex.Obligation, "due": ex.DueOn, "amount": ex.AmountMinor, "currency": ex.Currency,
		"aid": a.ID, "aidx": fi, "astatus": a.Status, "key": a.IdempotencyKey, "delay": delay.Seconds(),
		"auid": au.ID, "actortype": au.ActorType, "actor": au.ActorID, "action": au.Action, "entitytype": au.EntityType, "details": au.Details,
	}, jobs, &now)
	if err != nil {
		return nil, false, err
	}
	now = now.UTC()
	ex.CreatedAt, ex.UpdatedAt = now, now
	e.logStarted(ctx, &ex)
	return &ex, false, nil
}

// normalizeInput checks that raw is one JSON object and returns it compacted with sorted
// keys, so equal inputs hash equally.
func normalizeInput(raw []byte) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte("{}"), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, apperr.Invalid("input.notjson", map[string]string{"input": "is not valid JSON: " + strings.TrimPrefix(err.Error(), "json: ")})
	}
	if dec.More() {
		return nil, apperr.Invalid("input.notjson", map[string]string{"input": "input.trailing"})
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, apperr.Invalid("input.notobject", map[string]string{"input": "input.notobject.field"})
	}
	if problem := unstorable(v, "input"); problem != "" {
		return nil, apperr.Invalid("input.unstorable", map[string]string{"input": problem})
	}
	if len(raw) > 1<<20 {
		return nil, apperr.Invalid("input.toolarge", map[string]string{"input": "input.toolarge.field"})
	}
	return json.Marshal(v)
}

// unstorable names the first value in v that a database would refuse or change: a NUL
// character (PostgreSQL text and JSONB cannot hold it) or a number outside the range of a
// float64 (JSONB refuses 1e1000000). Empty when v can be stored as it is.
func unstorable(v any, path string) string {
	switch x := v.(type) {
	case string:
		if strings.IndexByte(x, 0) >= 0 {
			return path + " contains a NUL character (\\u0000), which cannot be stored"
		}
	case json.Number:
		if _, err := strconv.ParseFloat(string(x), 64); err != nil {
			return fmt.Sprintf("%s is a number out of range (%.40s); send it as a string", path, string(x))
		}
	case map[string]any:
		for k, val := range x {
			if strings.IndexByte(k, 0) >= 0 {
				return path + " has a key with a NUL character (\\u0000), which cannot be stored"
			}
			if p := unstorable(val, path+"."+k); p != "" {
				return p
			}
		}
	case []any:
		for i, val := range x {
			if p := unstorable(val, fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	}
	return ""
}

// inputMasker returns the masker of the secrets of def and of input (raw JSON).
func (e *secrets) inputMasker(def *definition.Definition, input []byte) *redact.Masker {
	var in any
	_ = json.Unmarshal(input, &in)
	return e.masker(def, in)
}

// subject renders the workflow's settings.subject over the input: nil (the title is then the
// short id) when the workflow sets none, when it fails, or when it renders to nothing but
// separators (the input lacks its fields). Secret values of the input never appear in it.
func (e *starts) subject(def *definition.Definition, in any, m *redact.Masker) *string {
	if def.Settings.Subject == "" || in == nil {
		return nil
	}
	s, err := tmpl.RenderString(def.Settings.Subject, map[string]any{"input": in})
	if err != nil {
		return nil
	}
	s = strings.Join(strings.Fields(m.Mask(s)), " ")
	if !strings.ContainsFunc(s, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
		return nil // nothing but the template's separators: the input lacks its fields
	}
	if r := []rune(s); len(r) > definition.MaxSubject {
		s = string(r[:definition.MaxSubject-1]) + "…"
	}
	return &s
}
