// Package audit writes the audit log, and reads it back (Reader). Every write happens inside
// the caller's transaction, so an audited change and its audit row commit or roll back
// together.
package audit

import (
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
)

// events are every event the audit log holds: seed 000's and Lifeline's own. The audit log
// page labels them (message audit.<event>) and offers them in its filter.
var events = []string{
	// seed 000
	"error.recorded", "error.retry_scheduled", "error.retry_exhausted", "error.handled",
	"dlq.created", "dlq.retry", "dlq.resolved", "dlq.skipped", "dlq.expired",
	"circuit.opened", "circuit.closed", "execution.rollback",
	// Lifeline's own
	"execution.started", "execution.reclaimed", "execution.failed", "reconcile.quarantined", "quarantine.released", "workflow.created", "workflow.updated",
	"token.created", "token.revoked", "organization.updated", "dlq.bulk", "dlq.bulk_cancelled", "dlq.group_muted", "dlq.split",
	"circuit.half_opened", "circuit.fallback", "compensation.completed", "compensation.failed", "compensation.retried",
	"compensation.skipped", "compensation.confirmed", "connection.created", "connection.updated",
	"connection.deleted", "notifications.updated", "notification.resent", "credential.created", "credential.replaced",
	"credential.deleted", "period.closed", "period.reopened",
	"dlq.change_requested", "dlq.change_approved", "dlq.change_rejected", "dlq.reopened", "dlq.admin_asked", "dlq.group_admin_asked",
	"organization.rules_updated", "poison.quarantined", "poison.released",
	"organization.escalation_updated", "dlq.group_escalated",
	"intervention.requested", "intervention.answered", "intervention.timed_out", "intervention.escalated", "execution.cancelled",
}

// entityTypes are the kinds of thing an event is about (message entity.<type>).
var entityTypes = []string{
	"workflow", "workflow_execution", "workflow_execution_error", "dead_letter_queue", "api_token",
	"organization", "circuit_breaker_state", "compensation_action", "db_connection", "dlq_bulk_job", "dlq_group",
	"notification_delivery", "notification_settings", "credential", "held_value", "closed_period",
	"intervention",
}

// Events returns every event Record accepts.
func Events() []string { return slices.Clone(events) }

// EntityTypes returns every entity type Record accepts.
func EntityTypes() []string { return slices.Clone(entityTypes) }

// Actor types.
const (
	ActorSystem = "system"
	ActorUser   = "user"
	ActorToken  = "api_token"
)

// Actor is who did something.
type Actor struct {
	Type string
	ID   string
}

// System is the engine itself.
var System = Actor{Type: ActorSystem}

// Entry is one event.
type Entry struct {
	OrganizationID string
	Actor          Actor
	Action         string
	EntityType     string
	EntityID       string
	Details        map[string]any
	At             time.Time
}

// Record writes e with tx. It refuses an event or an entity type that is not in Events or
// EntityTypes (the audit log could neither label nor filter it): add it there, with its
// labels in both languages.
func Record(tx *gorm.DB, e Entry) error {
	if !slices.Contains(events, e.Action) {
		return fmt.Errorf("audit: unknown event %q (add it to audit.Events)", e.Action)
	}
	if !slices.Contains(entityTypes, e.EntityType) {
		return fmt.Errorf("audit: unknown entity type %q (add it to audit.EntityTypes)", e.EntityType)
	}
	row := Row(e)
	if row.CreatedAt.IsZero() {
		row.CreatedAt = time.Now().UTC()
	}
	return tx.Create(&row).Error
}

// Row is the audit_log row of e, for callers that write it in a statement of their own
// (its CreatedAt is zero when e.At is).
func Row(e Entry) models.AuditEntry {
	row := models.AuditEntry{
		ID:             models.NewID(),
		OrganizationID: e.OrganizationID,
		ActorType:      e.Actor.Type,
		Action:         e.Action,
		EntityType:     e.EntityType,
		EntityID:       e.EntityID,
		Details:        models.MustJSON(orEmpty(e.Details)),
		CreatedAt:      e.At.UTC(),
	}
	if row.ActorType == "" {
		row.ActorType = ActorSystem
	}
	if e.Actor.ID != "" {
		id := e.Actor.ID
		row.ActorID = &id
	}
	return row
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
