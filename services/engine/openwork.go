package engine

import (
	"context"
	"fmt"

	"lifeline/models"
)

// foldOpenWork folds the deltas of open work of every organization that has some
// (models.DB.FoldOpenWork), so that the Today page, the deadlines API and the at-risk banner
// add few of them to what they read. The reconciler runs it: the deltas it folds are those
// of its interval.
func (e *maintenance) foldOpenWork(ctx context.Context) error {
	orgs, err := e.db.OrgsWithOpenWorkDeltas(ctx)
	if err != nil {
		return fmt.Errorf("open work to fold: %w", err)
	}
	for _, org := range orgs {
		if err := e.db.FoldOpenWork(ctx, org); err != nil {
			return fmt.Errorf("fold the open work of %s: %w", org, err)
		}
	}
	return e.foldGroupCounts(ctx)
}

// foldGroupCounts folds the deltas of failure groups' counters of every organization that
// has some (models.DB.FoldGroupCounts; PostgreSQL only), with the open work: the Problems
// page and the groups' readers add few of them. Hooks.InTx gets TransitionFoldGroupCounts
// and the organization once the fold has taken its deltas and before it writes the rows.
func (e *maintenance) foldGroupCounts(ctx context.Context) error {
	orgs, err := e.db.OrgsWithGroupCountDeltas(ctx)
	if err != nil {
		return fmt.Errorf("group counts to fold: %w", err)
	}
	hold := e.hooked().InTx
	for _, org := range orgs {
		var before func()
		if hold != nil {
			before = func() { hold(TransitionFoldGroupCounts, org) }
		}
		if err := e.db.FoldGroupCounts(ctx, org, before); err != nil {
			return fmt.Errorf("fold the group counts of %s: %w", org, err)
		}
	}
	return nil
}

// repairOpenWork recounts the open work of every organization (models.DB.OpenWorkDrift: it
// reads every open item, which is why it runs with retention, hourly) and sets the counters
// of those that differ to the recount (RepairOpenWork), logging what differed: a drift means
// the counters' triggers were bypassed (a table restored without them, say). It returns how
// many organizations it repaired.
func (e *maintenance) repairOpenWork(ctx context.Context) (int, error) {
	var orgs []string
	if err := e.db.Conn(ctx).Model(&models.Organization{}).Order("id").Pluck("id", &orgs).Error; err != nil {
		return 0, err
	}
	repaired := 0
	for _, org := range orgs {
		drift, err := e.db.OpenWorkDrift(ctx, org)
		if err != nil {
			return repaired, fmt.Errorf("recount the open work of %s: %w", org, err)
		}
		if len(drift) == 0 {
			continue
		}
		if err := e.db.RepairOpenWork(ctx, org); err != nil {
			return repaired, fmt.Errorf("repair the open work of %s: %w", org, err)
		}
		repaired++
		e.log.WarnContext(ctx, "counters of open work repaired: they differed from a recount of the items", "organization_id", org,
			"figures", len(drift), "first", drift[0])
	}
	return repaired, nil
}
