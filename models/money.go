package models

import (
	"context"
	"sort"
)

// CurrencySum is a sum of amounts in one currency, in its minor units (exact: summed as
// whole numbers by the database).
type CurrencySum struct {
	Currency string
	Minor    int64
	// Count is how many amounts were summed.
	Count int
}

// StuckMoney sums the amounts of the organization's open dead letters (pending or being
// retried) that f and groupID ("" for all) select, per currency, the largest first: the
// money the office's failures hold up.
func (db *DB) StuckMoney(ctx context.Context, orgID string, f AboutFilter, groupID string) ([]CurrencySum, error) {
	q := db.Conn(ctx).Table("dead_letter_queue").
		Select("currency, CAST(SUM(amount_minor) AS BIGINT) AS minor, COUNT(*) AS count").
		Where("organization_id = ? AND "+dlqOpen+" AND amount_minor IS NOT NULL", orgID)
	if groupID != "" {
		q = q.Where("group_id = ?", groupID)
	}
	q = f.where(q, "dead_letter_queue")
	var sums []CurrencySum
	if err := q.Group("currency").Scan(&sums).Error; err != nil {
		return nil, err
	}
	sort.Slice(sums, func(i, j int) bool {
		if sums[i].Minor != sums[j].Minor {
			return sums[i].Minor > sums[j].Minor
		}
		return sums[i].Currency < sums[j].Currency
	})
	return sums, nil
}
