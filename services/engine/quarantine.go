package engine

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/services/audit"
)

// A row the reconciler cannot settle is quarantined (models.QuarantinedRow): kept as it is,
// left out of later passes, logged and audited once (reconcile.quarantined), and listed for
// the organization's admins until one releases it. The pass goes on with the other rows: one
// bad row never stops lease reclaims, re-queues and compensation repair for every tenant.
//
// Errors that say the engine's own database is down or busy are not the row's fault: they
// end the pass as before (the next one, 10 s later, tries every row again).

// rowFault reports whether err, from settling one row, is that row's own fault (quarantine
// it) rather than the database's or a shutdown's (end the pass).
func rowFault(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) &&
		!models.Unavailable(err) && !models.Busy(err)
}

// quarantine keeps the row table/rowID of orgID out of later passes because settling it
// failed with cause. It fails only when the quarantine cannot be written.
func (e *Engine) quarantine(ctx context.Context, table, rowID, orgID string, executionID *string, cause error) error {
	reason := cleanText(cause.Error(), maxErrorMessage)
	var inserted bool
	err := e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		q := models.QuarantinedRow{OrganizationID: orgID, Table: table, RowID: rowID, ExecutionID: executionID, Reason: reason, CreatedAt: now}
		var err error
		if inserted, err = e.db.Quarantine(tx, &q); err != nil || !inserted {
			return nil, err
		}
		entityType, entityID := "workflow_execution", rowID
		if executionID != nil {
			entityID = *executionID
		}
		return nil, audit.Record(tx, audit.Entry{OrganizationID: orgID, Actor: audit.System, Action: "reconcile.quarantined",
			EntityType: entityType, EntityID: entityID, At: now, Details: map[string]any{"table": table, "rowId": rowID, "reason": reason}})
	})
	if err == nil && inserted {
		e.log.ErrorContext(ctx, "the reconciler cannot settle a row; it is quarantined and left out of later passes until an admin releases it",
			"table", table, "row_id", rowID, "organization_id", orgID, "err", cause)
	}
	return err
}
