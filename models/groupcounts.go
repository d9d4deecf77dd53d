package models

import (
	"context"
	"fmt"
	"sort"
	"time"

	"gorm.io/gorm"
)

// The counters of failure groups without a hot row (issue 22's performance line, migration
// 00046).
//
// Contract. A group's arrivals, counts (pending, processing, closed, open), open amount and
// last seen are its row's (dlq_groups) plus its deltas' not yet folded (dlq_group_counts).
// On PostgreSQL every transition that changes them inserts a delta in its transaction
// instead of updating the row, which every item of one problem would otherwise queue on
// (for the length of each commit); on SQLite (one writer, no lock queue) the transitions
// keep updating the row, and no delta is ever written. GroupCountDeltas is that switch, the
// only one. A reader reads GroupsNow, the rows with their deltas added in one statement (one
// snapshot: a fold between two reads would count its deltas twice, or not at all), so every
// figure is exact at any moment. FoldGroupCounts moves the deltas into the rows (the
// reconciler runs it with FoldOpenWork); GroupCountDrift recounts the items against
// GroupsNow, before and after a fold alike.

// GroupsNow is the relation readers read groups from: dlq_groups with the deltas of their
// counters not yet folded added (on SQLite, the table as it is).
const GroupsNow = "dlq_groups_now"

// GroupCountDeltas reports whether the transitions of tx's database write a group's
// counters as deltas (PostgreSQL) rather than updating its row (SQLite).
func GroupCountDeltas(tx *gorm.DB) bool { return tx.Dialector.Name() == Postgres }

// groupCountSums is what a fold sums per group of the deltas it deletes (d).
const groupCountSums = `SELECT group_id, CAST(SUM(arrivals) AS BIGINT) AS arrivals, CAST(SUM(pending_count) AS BIGINT) AS pending,
  CAST(SUM(processing_count) AS BIGINT) AS processing, CAST(SUM(closed_count) AS BIGINT) AS closed,
  CAST(SUM(open_count) AS BIGINT) AS open, CAST(SUM(open_amount_minor) AS BIGINT) AS amount, MAX(seen_at) AS seen_at
FROM d GROUP BY group_id ORDER BY group_id`

// FoldGroupCounts moves the organization's deltas of group counters into the groups' rows,
// in one transaction: the deltas committed when it starts are deleted and summed, then
// (before, when not nil, is called in the transaction between the two: a test's hook) each
// group's row gets its sums, in the order of the groups' ids. A delta committed meanwhile
// stays one for the next fold; a reader reads the same figures before, during and after
// (the deletion and the rows' update commit together). A fold waits for the failures
// joining a group (they hold its row in share mode) and makes new ones wait while it
// updates the row. No-op on SQLite. On PostgreSQL a deadlock with a transaction that locks
// several groups' rows (expiry) makes it try again, up to three times.
func (db *DB) FoldGroupCounts(ctx context.Context, orgID string, before func()) error {
	if db.Dialect != Postgres {
		return nil
	}
	var err error
	for range 3 {
		if err = db.foldGroupCounts(ctx, orgID, before); !Busy(err) {
			break
		}
	}
	return err
}

func (db *DB) foldGroupCounts(ctx context.Context, orgID string, before func()) error {
	return db.Tx(ctx, func(tx *gorm.DB) error {
		var sums []struct {
			GroupID                                     string
			Arrivals, Pending, Processing, Closed, Open int
			Amount                                      int64
			SeenAt                                      *time.Time
		}
		if err := tx.Raw("WITH d AS (DELETE FROM dlq_group_counts WHERE organization_id = ? RETURNING *) "+groupCountSums, orgID).
			Scan(&sums).Error; err != nil {
			return fmt.Errorf("fold group counts: %w", err)
		}
		if before != nil {
			before()
		}
		for _, s := range sums {
			if err := tx.Exec(`UPDATE dlq_groups SET arrivals = arrivals + ?, pending_count = pending_count + ?,
  processing_count = processing_count + ?, closed_count = closed_count + ?, open_count = open_count + ?,
  open_amount_minor = open_amount_minor + ?, last_seen_at = GREATEST(last_seen_at, CAST(? AS TIMESTAMPTZ))
WHERE organization_id = ? AND id = ?`, s.Arrivals, s.Pending, s.Processing, s.Closed, s.Open, s.Amount, s.SeenAt, orgID, s.GroupID).Error; err != nil {
				return fmt.Errorf("fold group counts: %w", err)
			}
		}
		return nil
	})
}

// OrgsWithGroupCountDeltas returns the organizations whose groups have deltas to fold.
func (db *DB) OrgsWithGroupCountDeltas(ctx context.Context) ([]string, error) {
	var orgs []string
	err := db.Conn(ctx).Table("dlq_group_counts").Distinct("organization_id").Pluck("organization_id", &orgs).Error
	sort.Strings(orgs)
	return orgs, err
}
