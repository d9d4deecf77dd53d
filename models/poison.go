package models

import (
	"context"

	"gorm.io/gorm"
)

// Poison inputs (issue 22).

// ValueCandidate is a dead letter whose search text holds a value: what a poison check
// needs of it.
type ValueCandidate struct {
	ID               string
	WorkflowID       string
	Status           string
	ManualRetryCount int
	// ErrorType is the type of the failure that made it (classify's types), ErrorCode its
	// code ("" when it has none).
	ErrorType     string
	ErrorCode     string
	OriginalInput JSON
	// Reason is the failure's reason, as the DLQ shows it.
	Reason string
}

// DeadLettersHolding returns up to limit of the organization's dead letters whose search
// text contains text (folded), newest first: the candidates a caller checks exactly. On
// PostgreSQL the trigram index of search_text answers it.
func (db *DB) DeadLettersHolding(ctx context.Context, orgID, text string, limit int) ([]ValueCandidate, error) {
	var out []ValueCandidate
	err := db.candidates(ctx, orgID).Where(db.contains("d.search_text"), containsPattern(Fold(text))).
		Order("d.created_at DESC").Limit(limit).Scan(&out).Error
	return out, err
}

// DeadLetterFailure returns the organization's dead letter id as a candidate. Errors:
// gorm.ErrRecordNotFound.
func (db *DB) DeadLetterFailure(ctx context.Context, orgID, id string) (ValueCandidate, error) {
	var out []ValueCandidate
	if err := db.candidates(ctx, orgID).Where("d.id = ?", id).Limit(1).Scan(&out).Error; err != nil {
		return ValueCandidate{}, err
	}
	if len(out) == 0 {
		return ValueCandidate{}, gorm.ErrRecordNotFound
	}
	return out[0], nil
}

// GroupFailures returns the newest limit dead letters of the organization's failure group.
func (db *DB) GroupFailures(ctx context.Context, orgID, groupID string, limit int) ([]ValueCandidate, error) {
	var out []ValueCandidate
	err := db.candidates(ctx, orgID).Where("d.group_id = ?", groupID).Order("d.created_at DESC").Limit(limit).Scan(&out).Error
	return out, err
}

// candidates selects the organization's dead letters as ValueCandidates.
func (db *DB) candidates(ctx context.Context, orgID string) *gorm.DB {
	return db.Conn(ctx).Table("dead_letter_queue d").
		Select("d.id, d.workflow_id, d.status, d.manual_retry_count, d.error_type, COALESCE(e.error_code, '') AS error_code, d.original_input, d.reason").
		Joins("LEFT JOIN workflow_execution_errors e ON e.id = d.error_id").
		Where("d.organization_id = ?", orgID)
}
