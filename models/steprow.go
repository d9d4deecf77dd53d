package models

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
)

// The step path's rows, read and written without GORM's reflection: the engine runs these
// statements for every step (issue 20, "no slower"), where building a statement from a
// struct's schema cost more than the database's own work. Each column list is written once
// here, beside the fields it fills; TestStepRowColumns checks that it names every column
// GORM maps (a field added to StepAttempt or Execution and not here fails it).

// column is one column of a row and where its value goes.
type column struct {
	name string
	dest any
}

// attemptColumns are every column of step_executions, with a's fields.
func attemptColumns(a *StepAttempt) []column {
	return []column{
		{"id", &a.ID}, {"organization_id", &a.OrganizationID}, {"execution_id", &a.ExecutionID},
		{"step_id", &a.StepID}, {"step_index", &a.StepIndex}, {"attempt", &a.Attempt}, {"status", &a.Status},
		{"generation", &a.Generation}, {"reclaims", &a.Reclaims}, {"idempotency_key", &a.IdempotencyKey},
		{"input", &a.Input}, {"output", &a.Output}, {"error_type", &a.ErrorType}, {"error_code", &a.ErrorCode},
		{"error_message", &a.ErrorMessage}, {"stack_trace", &a.StackTrace}, {"scheduled_at", &a.ScheduledAt},
		{"started_at", &a.StartedAt}, {"finished_at", &a.FinishedAt}, {"lease_expires_at", &a.LeaseExpiresAt},
		{"next_retry_at", &a.NextRetryAt}, {"duration_us", &a.DurationUs}, {"waiting_breaker_id", &a.WaitingBreakerID},
		{"handles_attempt_id", &a.HandlesAttemptID}, {"created_at", &a.CreatedAt}, {"updated_at", &a.UpdatedAt},
	}
}

// executionColumns are every column of workflow_executions, with ex's fields.
func executionColumns(ex *Execution) []column {
	return []column{
		{"id", &ex.ID}, {"organization_id", &ex.OrganizationID}, {"workflow_id", &ex.WorkflowID},
		{"workflow_version", &ex.WorkflowVersion}, {"status", &ex.Status}, {"input", &ex.Input},
		{"trigger_type", &ex.TriggerType}, {"correlation_id", &ex.CorrelationID}, {"current_step_id", &ex.CurrentStepID},
		{"created_by", &ex.CreatedBy}, {"subject", &ex.Subject}, {"search_text", &ex.SearchText}, {"retry_of", &ex.RetryOf},
		{"client", &ex.Client}, {"period", &ex.Period}, {"obligation", &ex.Obligation}, {"due_on", &ex.DueOn},
		{"amount_minor", &ex.AmountMinor}, {"currency", &ex.Currency},
		{"dead_letter_id", &ex.DeadLetterID}, {"replayed_at", &ex.ReplayedAt}, {"retry_override", &ex.RetryOverride},
		{"original_input", &ex.OriginalInput}, {"rollback_status", &ex.RollbackStatus}, {"started_at", &ex.StartedAt},
		{"finished_at", &ex.FinishedAt}, {"created_at", &ex.CreatedAt}, {"updated_at", &ex.UpdatedAt},
	}
}

// selectList is the columns' names, each prefixed with alias and a dot.
func selectList(alias string, cols []column) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = alias + "." + c.name
	}
	return strings.Join(names, ", ")
}

// attemptExecutionQuery reads an attempt and its execution (of the attempt's organization).
var attemptExecutionQuery = "SELECT " + selectList("a", attemptColumns(&StepAttempt{})) + ", " +
	selectList("e", executionColumns(&Execution{})) +
	" FROM step_executions a JOIN workflow_executions e ON e.id = a.execution_id AND e.organization_id = a.organization_id WHERE a.id = ?"

// AttemptAndExecution reads the attempt id into a and its execution into ex, in one query:
// what the step path needs before it claims the attempt. gorm.ErrRecordNotFound
// (IsNotFound) when there is no such attempt (or its execution is not of its organization).
func (db *DB) AttemptAndExecution(ctx context.Context, id string, a *StepAttempt, ex *Execution) error {
	rows, err := db.Conn(ctx).Raw(attemptExecutionQuery, id).Rows()
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return gorm.ErrRecordNotFound
	}
	ac, ec := attemptColumns(a), executionColumns(ex)
	dest := make([]any, 0, len(ac)+len(ec))
	for _, c := range ac {
		dest = append(dest, c.dest)
	}
	for _, c := range ec {
		dest = append(dest, c.dest)
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	return rows.Close()
}

// insertOf is the INSERT of every column of table.
func insertOf(table string, cols []column) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	return "INSERT INTO " + table + " (" + strings.Join(names, ", ") + ") VALUES (?" + strings.Repeat(", ?", len(cols)-1) + ")"
}

var (
	attemptInsert   = insertOf("step_executions", attemptColumns(&StepAttempt{}))
	executionInsert = insertOf("workflow_executions", executionColumns(&Execution{}))
)

// CreateAttempt inserts a in tx, every column as a holds it, its times set as GORM's Create
// sets them when zero: what tx.Create(a) writes, for the step path (no reflection).
func CreateAttempt(tx *gorm.DB, a *StepAttempt) error {
	stampCreated(tx, &a.CreatedAt, &a.UpdatedAt)
	return tx.Exec(attemptInsert, argsOf(attemptColumns(a))...).Error
}

// CreateExecution inserts ex in tx as tx.Create(ex) does (its BeforeCreate included), for
// the start of an execution (no reflection).
func CreateExecution(tx *gorm.DB, ex *Execution) error {
	if err := ex.BeforeCreate(tx); err != nil {
		return err
	}
	stampCreated(tx, &ex.CreatedAt, &ex.UpdatedAt)
	return tx.Exec(executionInsert, argsOf(executionColumns(ex))...).Error
}

// stampCreated sets zero creation and update times to tx's clock, as GORM's Create does.
func stampCreated(tx *gorm.DB, created, updated *time.Time) {
	if created.IsZero() || updated.IsZero() {
		now := tx.NowFunc()
		if created.IsZero() {
			*created = now
		}
		if updated.IsZero() {
			*updated = now
		}
	}
}

// argsOf are the columns' values, as a statement's arguments.
func argsOf(cols []column) []any {
	args := make([]any, len(cols))
	for i, c := range cols {
		args[i] = argOf(c.dest)
	}
	return args
}

// argOf is the value a column's destination points to, as a statement's argument.
func argOf(p any) any {
	switch v := p.(type) {
	case *string:
		return *v
	case *int:
		return *v
	case *JSON:
		return *v
	case **string:
		return *v
	case **int64:
		return *v
	case *time.Time:
		return *v
	case **time.Time:
		return *v
	}
	panic(fmt.Sprintf("models: no argument for %T", p))
}
