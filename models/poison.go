package models

import "context"

// Poison inputs (issue 22).

// ValueCandidate is a dead letter whose search text holds a value: what a poison check
// needs of it.
type ValueCandidate struct {
	ID               string
	WorkflowID       string
	Status           string
	ManualRetryCount int
	// ErrorType is the type of the failure that made it (classify's types).
	ErrorType     string
	OriginalInput JSON
}

// DeadLettersHolding returns up to limit of the organization's dead letters whose search
// text contains text (folded), newest first: the candidates a caller checks exactly. On
// PostgreSQL the trigram index of search_text answers it.
func (db *DB) DeadLettersHolding(ctx context.Context, orgID, text string, limit int) ([]ValueCandidate, error) {
	var out []ValueCandidate
	err := db.Conn(ctx).Model(&DeadLetter{}).Select("id, workflow_id, status, manual_retry_count, error_type, original_input").
		Where("organization_id = ?", orgID).Where(db.contains("search_text"), containsPattern(Fold(text))).
		Order("created_at DESC").Limit(limit).Find(&out).Error
	return out, err
}
