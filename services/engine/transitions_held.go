package engine

import (
	"gorm.io/gorm/clause"

	"lifeline/models"
	"lifeline/models/apperr"
)

// Transitions of held values (held.go).

// HoldValue records hv as held: lost (ECONFLICT hold.conflict.held) when its organization
// holds the same kind and value already (the partial unique index of the held ones).
func (s stateTx) HoldValue(hv *models.HeldValue) error {
	res := s.tx.Clauses(clause.OnConflict{DoNothing: true}).Create(hv)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return apperr.Errorf(apperr.ECONFLICT, "hold.conflict.held")
	}
	return nil
}

// ReleaseValue releases the organization's hold id, from held: lost (ECONFLICT
// hold.conflict.released) when it is released already or is not the organization's.
func (s stateTx) ReleaseValue(orgID, id, by string) error {
	res := s.tx.Model(&models.HeldValue{}).Where("organization_id = ? AND id = ? AND released_at IS NULL", orgID, id).
		Updates(map[string]any{"released_at": s.now, "released_by": by})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return apperr.Errorf(apperr.ECONFLICT, "hold.conflict.released")
	}
	return nil
}
