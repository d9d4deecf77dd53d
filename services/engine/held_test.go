package engine

import (
	"testing"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
)

// TestHeldTransitions: HoldValue and ReleaseValue on each database, and their lost cases:
// a value held twice (however written) is ECONFLICT and writes nothing; released twice is
// ECONFLICT; another organization's hold is ENOTFOUND; a released value can be held again;
// bad input is EINVALID naming its fields; each change is audited once.
func TestHeldTransitions(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		f := newFixture(t, db)
		other := newFixture(t, db)
		held := f.e.Held()
		actor := audit.Actor{Type: audit.ActorUser, ID: models.NewID()}
		code := func(err error) string {
			if err == nil {
				return ""
			}
			return apperr.ErrorCode(err)
		}
		if _, err := held.Hold(f.ctx, HoldRequest{OrganizationID: f.org, Value: "Kowalski", Note: " ", Actor: actor}); code(err) != apperr.EINVALID {
			t.Fatalf("bad input: %v", err)
		} else if ae := err.(*apperr.Error); ae.Fields["value"] == "" || ae.Fields["note"] == "" {
			t.Errorf("fields: %v", ae.Fields)
		}
		hv, err := held.Hold(f.ctx, HoldRequest{OrganizationID: f.org, Value: "526-025-02-74", Note: "zły NIP", Actor: actor, By: "admin@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		if hv.Kind != "nip" || hv.Value != "5260250274" || hv.HeldBy != "admin@example.com" {
			t.Errorf("hold %+v", hv)
		}
		if _, err := held.Hold(f.ctx, HoldRequest{OrganizationID: f.org, Value: "5260250274", Note: "znowu", Actor: actor}); code(err) != apperr.ECONFLICT {
			t.Errorf("held twice: %v", err)
		}
		// Another organization holds the same value on its own.
		if _, err := held.Hold(f.ctx, HoldRequest{OrganizationID: other.org, Value: "5260250274", Note: "u nas też", Actor: actor}); err != nil {
			t.Errorf("another organization's hold: %v", err)
		}
		if _, err := held.Release(f.ctx, other.org, hv.ID, actor, "x"); code(err) != apperr.ENOTFOUND {
			t.Errorf("released by another organization: %v", err)
		}
		if rows, _ := held.List(f.ctx, f.org); len(rows) != 1 || rows[0].ID != hv.ID {
			t.Errorf("list %+v", rows)
		}
		if _, err := held.Release(f.ctx, f.org, hv.ID, actor, "admin@example.com"); err != nil {
			t.Fatal(err)
		}
		if _, err := held.Release(f.ctx, f.org, hv.ID, actor, "admin@example.com"); code(err) != apperr.ECONFLICT {
			t.Errorf("released twice: %v", err)
		}
		if rows, _ := held.List(f.ctx, f.org); len(rows) != 0 {
			t.Errorf("listed once released: %+v", rows)
		}
		if _, err := held.Hold(f.ctx, HoldRequest{OrganizationID: f.org, Value: "5260250274", Note: "jednak", Actor: actor}); err != nil {
			t.Errorf("held again after release: %v", err)
		}
		var actions []string
		db.Conn(f.ctx).Model(&models.AuditEntry{}).Where("organization_id = ? AND entity_id = ?", f.org, hv.ID).Order("action").Pluck("action", &actions)
		if len(actions) != 2 || actions[0] != "poison.quarantined" || actions[1] != "poison.released" {
			t.Errorf("audit %v", actions)
		}
	})
}
