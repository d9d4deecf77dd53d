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

// quarantine keeps the row q names (its table, row, organization and execution) out of
// later passes because settling it failed with cause. It fails only when the quarantine
// cannot be written.
func (e *maintenance) quarantine(ctx context.Context, row models.QuarantinedRow, cause error) error {
	table, rowID, orgID, executionID := row.Table, row.RowID, row.OrganizationID, row.ExecutionID
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

// Quarantined does what Engine.Quarantined says.
func (e *maintenance) Quarantined(ctx context.Context, orgID string, limit int) ([]models.QuarantinedRow, error) {
	rows, err := e.db.QuarantinedRows(ctx, orgID, limit)
	for i := range rows {
		rows[i].Reason = e.redactor.Text(rows[i].Reason)
	}
	return rows, err
}

// ReleaseQuarantined does what Engine.ReleaseQuarantined says.
func (e *maintenance) ReleaseQuarantined(ctx context.Context, orgID, id string, actor audit.Actor) error {
	return e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		q, err := e.db.ReleaseQuarantined(tx, orgID, id)
		if err != nil {
			return nil, err
		}
		entityID := q.RowID
		if q.ExecutionID != nil {
			entityID = *q.ExecutionID
		}
		return nil, audit.Record(tx, audit.Entry{OrganizationID: orgID, Actor: actor, Action: "quarantine.released",
			EntityType: "workflow_execution", EntityID: entityID, At: now, Details: map[string]any{"table": q.Table, "rowId": q.RowID}})
	})
}
