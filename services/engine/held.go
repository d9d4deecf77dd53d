package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/classify"
	"lifeline/services/poison"
)

// Held values (issue 22, seed 004's poison messages): an admin quarantines an input value
// (a document or invoice number, a NIP) that keeps breaking runs. While it is held, an
// attempt of an execution whose input carries it is not run: at its claim, before anything
// is rendered or sent (no request, no database operation, no breaker counted), the step
// fails with a validation error of code QUARANTINED that names the value and who held it.
// That error is never retried, hands nothing to an on-failure handler and starts no
// rollback: the execution goes straight to the DLQ, where its item joins a group like any
// other. A replay of it while the value is still held comes straight back the same way;
// once it is released, a retry runs normally.
//
// The check costs the step path no database work for an organization with nothing held:
// each process keeps the organization's held values for heldCacheTTL (one indexed query of
// them when that has passed), and forgets them at once when it holds or releases one
// itself. Another process sees a hold or a release within heldCacheTTL.

// CodeQuarantined is the error code of a step not run because its execution's input
// carries a held value.
const CodeQuarantined = "QUARANTINED"

// heldCacheTTL is how long a process trusts the held values it read of an organization.
const heldCacheTTL = time.Second

// maxHeld bounds the held values of an organization the check reads (and the list shows).
const maxHeld = 1000

// maxHoldNote bounds a hold's note.
const maxHoldNote = 1000

// heldCache remembers each organization's held values (kind + value → the hold).
type heldCache struct {
	mu sync.Mutex
	m  map[string]heldEntry
	// gen counts the changes this process made to an organization's held values: a read
	// that began before one is not cached.
	gen map[string]int
}

type heldEntry struct {
	at     time.Time
	values map[string]*models.HeldValue
}

func heldKey(kind, value string) string { return kind + "\x00" + value }

// get returns the organization's cached held values, and the generation a read of them
// would be cached under when there are none cached.
func (c *heldCache) get(orgID string) (map[string]*models.HeldValue, bool, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[orgID]
	if !ok || time.Since(e.at) > heldCacheTTL {
		return nil, false, c.gen[orgID]
	}
	return e.values, true, 0
}

func (c *heldCache) set(orgID string, gen int, rows []models.HeldValue, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen[orgID] != gen {
		return // changed here while it was read
	}
	if c.m == nil || len(c.m) > 10_000 {
		c.m = map[string]heldEntry{}
	}
	e := heldEntry{at: at}
	if len(rows) > 0 {
		e.values = make(map[string]*models.HeldValue, len(rows))
		for i := range rows {
			e.values[heldKey(rows[i].Kind, rows[i].Value)] = &rows[i]
		}
	}
	c.m[orgID] = e
}

// forget drops the organization's cached held values after this process changed them.
func (c *heldCache) forget(orgID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == nil {
		c.gen = map[string]int{}
	}
	c.gen[orgID]++
	delete(c.m, orgID)
}

// heldIn returns the held value ex's input carries (nil: none). The input is read as its
// dead letter keeps it (secret keys redacted), so a secret never matches.
func (e *core) heldIn(ctx context.Context, ex *models.Execution) (*models.HeldValue, error) {
	values, ok, gen := e.held.get(ex.OrganizationID)
	if !ok {
		rows, err := e.db.HeldValues(ctx, ex.OrganizationID, maxHeld)
		if err != nil {
			return nil, err
		}
		e.held.set(ex.OrganizationID, gen, rows, time.Now())
		values = map[string]*models.HeldValue{}
		for i := range rows {
			values[heldKey(rows[i].Kind, rows[i].Value)] = &rows[i]
		}
	}
	if len(values) == 0 {
		return nil, nil
	}
	for _, v := range poison.Values(e.redactor.JSON(ex.Input)) {
		if h, ok := values[heldKey(v.Kind, v.Key)]; ok {
			return h, nil
		}
	}
	return nil, nil
}

// quarantined is the failure of a step not run because of h.
func quarantined(h *models.HeldValue) error {
	return classify.New(classify.Validation, CodeQuarantined, fmt.Sprintf(
		"The value %s is quarantined by %s; the step was not run. Note: %s", h.Value, h.HeldBy, h.Note))
}

// Held is what admins do to held values (Engine.Held).
type Held struct{ e *Engine }

// Held returns the engine's held-value actions.
func (e *Engine) Held() Held { return Held{e: e} }

// HoldRequest asks to quarantine a value of an organization.
type HoldRequest struct {
	OrganizationID string
	// Value is the identifier as written ("FV/2026/10/77", "526-025-02-74"): it must be one
	// that poison.Identify knows.
	Value string
	// Note says why (required).
	Note  string
	Actor audit.Actor
	// By names the actor for people (an e-mail address, a token's name).
	By string
}

// List returns the organization's held values, newest first.
func (h Held) List(ctx context.Context, orgID string) ([]models.HeldValue, error) {
	return h.e.db.HeldValues(ctx, orgID, maxHeld)
}

// Get returns the organization's hold id (held or released). Errors: ENOTFOUND for another
// organization's or an unknown one.
func (h Held) Get(ctx context.Context, orgID, id string) (*models.HeldValue, error) {
	var v models.HeldValue
	if err := h.e.db.Conn(ctx).Where("organization_id = ? AND id = ?", orgID, id).First(&v).Error; err != nil {
		if models.IsNotFound(err) {
			return nil, apperr.NotFound("held value")
		}
		return nil, err
	}
	return &v, nil
}

// Hold quarantines r.Value for its organization; audit poison.quarantined. Errors: EINVALID
// (hold.invalid) naming value (empty, or not an identifier) and note (empty, too long);
// ECONFLICT (hold.conflict.held) when the value is held already.
func (h Held) Hold(ctx context.Context, r HoldRequest) (*models.HeldValue, error) {
	fields := map[string]string{}
	v, ok := poison.Identify(r.Value)
	switch {
	case strings.TrimSpace(r.Value) == "":
		fields["value"] = "is required"
	case !ok:
		fields["value"] = "hold.value.unknown"
	}
	note := strings.TrimSpace(r.Note)
	switch {
	case note == "":
		fields["note"] = "is required"
	case utf8.RuneCountInString(note) > maxHoldNote:
		fields["note"] = fmt.Sprintf("must be at most %d characters", maxHoldNote)
	}
	if len(fields) > 0 {
		return nil, apperr.Invalid("hold.invalid", fields)
	}
	hv := &models.HeldValue{ID: models.NewID(), OrganizationID: r.OrganizationID, Kind: v.Kind, Value: v.Key, Note: note,
		HeldBy: cleanText(r.By, 320)}
	err := h.e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		hv.HeldAt = now
		if err := (stateTx{tx: tx, now: now}).HoldValue(hv); err != nil {
			return nil, err
		}
		return nil, audit.Record(tx, audit.Entry{OrganizationID: r.OrganizationID, Actor: r.Actor, Action: "poison.quarantined",
			EntityType: "held_value", EntityID: hv.ID, At: now, Details: map[string]any{"kind": hv.Kind, "value": hv.Value, "note": note}})
	})
	if err != nil {
		return nil, err
	}
	h.e.held.forget(r.OrganizationID)
	return hv, nil
}

// Release ends the organization's hold id; audit poison.released. Errors: ENOTFOUND for
// another organization's or an unknown hold; ECONFLICT (hold.conflict.released) when it
// was released already.
func (h Held) Release(ctx context.Context, orgID, id string, actor audit.Actor, by string) (*models.HeldValue, error) {
	var hv *models.HeldValue
	err := h.e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		var row models.HeldValue
		if err := tx.Where("organization_id = ? AND id = ?", orgID, id).First(&row).Error; err != nil {
			if models.IsNotFound(err) {
				return nil, apperr.NotFound("held value")
			}
			return nil, err
		}
		by := cleanText(by, 320)
		if err := (stateTx{tx: tx, now: now}).ReleaseValue(orgID, id, by); err != nil {
			return nil, err
		}
		row.ReleasedAt, row.ReleasedBy, hv = &now, &by, &row
		return nil, audit.Record(tx, audit.Entry{OrganizationID: orgID, Actor: actor, Action: "poison.released",
			EntityType: "held_value", EntityID: id, At: now, Details: map[string]any{"kind": row.Kind, "value": row.Value}})
	})
	if err != nil {
		return nil, err
	}
	h.e.held.forget(orgID)
	return hv, nil
}
