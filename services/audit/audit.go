// Package audit writes the audit log. Every write happens inside the caller's transaction,
// so an audited change and its audit row commit or roll back together.
package audit

import (
	"time"

	"gorm.io/gorm"

	"lifeline/models"
)

// Events of seed 000 (with their Polish labels), plus Lifeline's own.
var Labels = map[string]string{
	"error.recorded":        "Zarejestrowano błąd wykonania",
	"error.retry_scheduled": "Zaplanowano ponowną próbę",
	"error.retry_exhausted": "Wyczerpano limity ponowień",
	"dlq.created":           "Dodano do kolejki DLQ",
	"dlq.retry":             "Ponowiono z kolejki DLQ",
	"dlq.resolved":          "Rozwiązano element DLQ",
	"dlq.skipped":           "Pominięto element DLQ",
	"circuit.opened":        "Otwarto obwód bezpieczeństwa",
	"circuit.closed":        "Zamknięto obwód bezpieczeństwa",
	"error.handled":         "Obsłużono błąd krokiem obsługi",
	"execution.rollback":    "Wykonano rollback",
	"dlq.expired":           "Wygasł element DLQ",
	"execution.started":     "Uruchomiono wykonanie",
	"execution.reclaimed":   "Przejęto przerwaną próbę",
	"workflow.created":      "Utworzono przepływ",
	"workflow.updated":      "Zaktualizowano przepływ",
}

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

// Record writes e with tx.
func Record(tx *gorm.DB, e Entry) error {
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
