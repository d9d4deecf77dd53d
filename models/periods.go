package models

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"lifeline/models/apperr"
)

// ClosedPeriod is a period the office has closed (issue 23): for one client, or for every
// client (Client ""). While it is closed, steps that post to a period do not run for the
// executions it covers (ClosedPeriodFor).
type ClosedPeriod struct {
	ID             string
	OrganizationID string
	// Period is YYYY-MM, YYYY-Qn or YYYY.
	Period string
	// Client is the client's key, as executions carry it; "" for every client.
	Client string
	Note   string
	// ClosedByType and ClosedBy are the actor who closed it (audit's actor type and id; nil
	// id for the system); ClosedByName is how it was shown then (a user's name or e-mail, a
	// token's name).
	ClosedByType string
	ClosedBy     *string
	ClosedByName string
	ClosedAt     time.Time
}

func (ClosedPeriod) TableName() string { return "closed_periods" }

// ClosedPeriods returns the organization's closed periods, the most recently closed first.
func (db *DB) ClosedPeriods(ctx context.Context, orgID string) ([]ClosedPeriod, error) {
	var out []ClosedPeriod
	err := db.Conn(ctx).Where("organization_id = ?", orgID).Order("closed_at DESC, id DESC").Find(&out).Error
	return out, err
}

// GetClosedPeriod returns the organization's closed period id (a UUID), or ENOTFOUND.
func (db *DB) GetClosedPeriod(ctx context.Context, orgID, id string) (*ClosedPeriod, error) {
	var p ClosedPeriod
	if err := db.Conn(ctx).Where("organization_id = ? AND id = ?", orgID, id).First(&p).Error; err != nil {
		if IsNotFound(err) {
			return nil, apperr.NotFound("closed period")
		}
		return nil, err
	}
	return &p, nil
}

// ClosedPeriodAt returns the organization's row closing exactly period for client ("" every
// client) with tx, or nil when there is none.
func ClosedPeriodAt(tx *gorm.DB, orgID, period, client string) (*ClosedPeriod, error) {
	var p ClosedPeriod
	err := tx.Where("organization_id = ? AND period = ? AND client = ?", orgID, period, client).First(&p).Error
	if IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// ClosePeriod inserts p with tx: the guarded change closed ← open. It reports false (and
// writes nothing) when the organization already has that period closed for that client
// (the unique constraint decides between two admins closing it at once). On PostgreSQL the
// insert runs in a savepoint, so losing leaves tx usable.
func ClosePeriod(tx *gorm.DB, p *ClosedPeriod) (bool, error) {
	var won bool
	err := tx.Transaction(func(tx *gorm.DB) error {
		err := tx.Create(p).Error
		if IsUniqueViolation(err) {
			return errLostClose
		}
		won = err == nil
		return err
	})
	if errors.Is(err, errLostClose) {
		return false, nil
	}
	return won, err
}

var errLostClose = apperr.Errorf(apperr.ECONFLICT, "closed period: lost")

// ReopenPeriod deletes the organization's closed period id with tx: the guarded change
// open ← closed. It reports false when it lost (the period was reopened meanwhile, or is
// not the organization's), changing nothing.
func ReopenPeriod(tx *gorm.DB, orgID, id string) (bool, error) {
	r := tx.Where("organization_id = ? AND id = ?", orgID, id).Delete(&ClosedPeriod{})
	return r.RowsAffected == 1, r.Error
}

// ClosedPeriodFor returns the row that closes period for client in the organization, with
// tx, or nil when the period is open: a row for that client or for every client, whose
// period is the period itself or covers it (a closed quarter or year covers its months, a
// closed year its quarters). One indexed query. An empty or malformed period is open.
func ClosedPeriodFor(tx *gorm.DB, orgID, client, period string) (*ClosedPeriod, error) {
	covering := PeriodsCovering(period)
	if len(covering) == 0 {
		return nil, nil
	}
	var out []ClosedPeriod
	err := tx.Where("organization_id = ? AND period IN ? AND client IN ?", orgID, covering, []string{"", client}).
		Order("closed_at, id").Limit(1).Find(&out).Error
	if err != nil || len(out) == 0 {
		return nil, err
	}
	return &out[0], nil
}

// PeriodsCovering returns period (YYYY-MM, YYYY-Qn or YYYY) and the periods that contain
// it: 2026-08 → 2026-08, 2026-Q3, 2026; 2026-Q3 → 2026-Q3, 2026; 2026 → 2026. Nil for text
// that is none of them.
func PeriodsCovering(period string) []string {
	if len(period) < 4 {
		return nil
	}
	year := period[:4]
	if _, err := strconv.Atoi(year); err != nil {
		return nil
	}
	rest, ok := strings.CutPrefix(period[4:], "-")
	switch {
	case period == year:
		return []string{year}
	case !ok:
		return nil
	case len(rest) == 2 && (rest[0] == 'Q' || rest[0] == 'q') && rest[1] >= '1' && rest[1] <= '4':
		return []string{year + "-Q" + rest[1:], year}
	case len(rest) == 2:
		m, err := strconv.Atoi(rest)
		if err != nil || m < 1 || m > 12 {
			return nil
		}
		return []string{period, year + "-Q" + strconv.Itoa((m-1)/3+1), year}
	}
	return nil
}
