// Package fixrules holds who may fix what in an organization (issue 21): the organization's
// rule "accountants may edit input and close items" (on by default; admins change it), and
// "ask an admin", an accountant's in-app request that lands in every admin's inbox when her
// role or the rule stops her. The rule itself is applied by the handlers that check roles;
// a money-moving workflow's approval of an edited input is the engine's
// (engine.RequestInputChange).
package fixrules

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
)

// MaxNote bounds an ask's note.
const MaxNote = 2000

// Service reads and changes the rules and sends asks.
type Service struct {
	DB *models.DB
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// Rules are an organization's rules of who may fix what (the API's
// /api/v1/organization/settings).
type Rules struct {
	// AccountantsMayFix: accountants may edit an item's input, skip its failed step and close
	// it as resolved or skipped. Off: those are admins'; accountants still retry, resume and
	// retry the whole workflow, and may ask an admin.
	AccountantsMayFix bool `json:"accountantsMayFix"`
	// BulkRate is how many dead letters a second the organization's bulk actions act on
	// (models.BulkRateMin–BulkRateMax, default 20); a target's circuit breaker slows or
	// pauses them further.
	BulkRate int `json:"bulkRate"`
	// ZUSDay is the day of the month ZUS contributions are due (15 or 20; issue 23).
	ZUSDay int `json:"zusDay"`
	// RiskWorkingDays is how many working days before its due date open work is at risk
	// (0–models.RiskDaysMax, default 3): the lists put it first, the banner names it and the
	// reminders go out at this many, 1 and 0 working days left.
	RiskWorkingDays int `json:"riskWorkingDays"`
}

// ValidZUSDay returns a field message when v is not a ZUS day, or "".
func ValidZUSDay(v int) string {
	if v != 15 && v != 20 {
		return "must be one of 15, 20"
	}
	return ""
}

// ValidRiskDays returns a field message when v is not a number of at-risk working days, or "".
func ValidRiskDays(v int) string {
	if v < 0 || v > models.RiskDaysMax {
		return fmt.Sprintf("must be between %d and %d", 0, models.RiskDaysMax)
	}
	return ""
}

// check returns the field messages of r's values out of range (nil when none is).
func (r Rules) check() map[string]string {
	fields := map[string]string{}
	for k, msg := range map[string]string{"bulkRate": ValidBulkRate(r.BulkRate), "zusDay": ValidZUSDay(r.ZUSDay), "riskWorkingDays": ValidRiskDays(r.RiskWorkingDays)} {
		if msg != "" {
			fields[k] = msg
		}
	}
	if len(fields) == 0 {
		return nil
	}
	return fields
}

// ValidBulkRate returns a field message when v is not a bulk rate, or "".
func ValidBulkRate(v int) string {
	if v < models.BulkRateMin || v > models.BulkRateMax {
		return fmt.Sprintf("must be between %d and %d", models.BulkRateMin, models.BulkRateMax)
	}
	return ""
}

// Rules returns the organization's rules.
func (s *Service) Rules(ctx context.Context, orgID string) (Rules, error) {
	v, err := s.DB.AccountantsMayFix(ctx, orgID)
	if err != nil {
		return Rules{}, err
	}
	rate, err := s.DB.BulkRate(ctx, orgID)
	if err != nil {
		return Rules{}, err
	}
	d, err := s.DB.DeadlineRules(ctx, orgID)
	return Rules{AccountantsMayFix: v, BulkRate: rate, ZUSDay: d.ZUSDay, RiskWorkingDays: d.RiskWorkingDays}, err
}

// ParsePatch reads a change of the rules (a JSON object whose keys are Rules' fields, each
// optional) over cur. EINVALID with a message per field: an unknown key, or a value of the
// wrong type.
func ParsePatch(cur Rules, raw []byte) (Rules, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&m); err != nil || m == nil {
		return cur, apperr.Invalid("rules.invalid", map[string]string{"body": "must be a JSON object"})
	}
	fields := map[string]string{}
	for k, v := range m {
		switch k {
		case "accountantsMayFix":
			if err := json.Unmarshal(v, &cur.AccountantsMayFix); err != nil || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
				fields[k] = "must be true or false"
			}
		case "bulkRate":
			var n json.Number // a JSON number only: not a string, not null
			t := bytes.TrimSpace(v)
			if len(t) == 0 || (t[0] != '-' && (t[0] < '0' || t[0] > '9')) || json.Unmarshal(t, &n) != nil {
				fields[k] = ValidBulkRate(0)
				break
			}
			i, err := n.Int64()
			if err != nil || i < models.BulkRateMin || i > models.BulkRateMax {
				fields[k] = ValidBulkRate(0)
				break
			}
			cur.BulkRate = int(i)
		case "zusDay", "riskWorkingDays":
			i, ok := jsonInt(v)
			p := &cur.ZUSDay
			valid := ValidZUSDay
			if k == "riskWorkingDays" {
				p, valid = &cur.RiskWorkingDays, ValidRiskDays
			}
			if msg := valid(i); !ok || msg != "" {
				fields[k] = valid(-1)
				break
			}
			*p = i
		default:
			fields[k] = "is not a setting of the organization"
		}
	}
	if len(fields) > 0 {
		return cur, apperr.Invalid("rules.invalid", fields)
	}
	return cur, nil
}

// jsonInt reads a JSON whole number (not a string, not null, not a fraction).
func jsonInt(v json.RawMessage) (int, bool) {
	var n json.Number
	t := bytes.TrimSpace(v)
	if len(t) == 0 || (t[0] != '-' && (t[0] < '0' || t[0] > '9')) || json.Unmarshal(t, &n) != nil {
		return 0, false
	}
	i, err := n.Int64()
	if err != nil || i < -1<<31 || i > 1<<31-1 {
		return 0, false
	}
	return int(i), true
}

// SaveRules stores the organization's rules, audited (organization.rules_updated) when they
// change. Errors: EINVALID with a message per field out of range (bulkRate, zusDay,
// riskWorkingDays); nothing is stored then.
func (s *Service) SaveRules(ctx context.Context, orgID string, actor audit.Actor, r Rules) (Rules, error) {
	if fields := r.check(); fields != nil {
		return r, apperr.Invalid("rules.invalid", fields)
	}
	cur, err := s.Rules(ctx, orgID)
	if err != nil || cur == r {
		return r, err
	}
	err = s.DB.Tx(ctx, func(tx *gorm.DB) error {
		if err := models.SetAccountantsMayFix(tx, orgID, r.AccountantsMayFix); err != nil {
			return err
		}
		if err := models.SetBulkRate(tx, orgID, r.BulkRate); err != nil {
			return err
		}
		if err := models.SetDeadlineRules(tx, orgID, models.DeadlineRules{ZUSDay: r.ZUSDay, RiskWorkingDays: r.RiskWorkingDays}); err != nil {
			return err
		}
		return audit.Record(tx, audit.Entry{OrganizationID: orgID, Actor: actor, Action: "organization.rules_updated",
			EntityType: "organization", EntityID: orgID, At: s.now(),
			Details: map[string]any{"accountantsMayFix": r.AccountantsMayFix, "bulkRate": r.BulkRate,
				"zusDay": r.ZUSDay, "riskWorkingDays": r.RiskWorkingDays}})
	})
	return r, err
}

// Ask is an accountant's request to the admins about one dead letter.
type Ask struct {
	OrganizationID string
	DeadLetterID   string
	Note           string
	Actor          audit.Actor
	// Title and Link are what the inbox entry shows and links to (the item's page).
	Title, Link string
}

// Asked says what an ask did.
type Asked struct {
	// Already: an ask about the item is open (made since the item last changed): nothing was
	// added; At is when it was made.
	Already bool
	At      time.Time
}

// AskAdmin puts a request about a pending dead letter in every admin's inbox, audited
// (dlq.admin_asked). An ask stays open until the item changes (a replay, a closure); asking
// again while one is open adds nothing and says when it was made (two asks at the same
// moment add one inbox entry each admin: the entries' key is the item's state). Errors:
// ENOTFOUND (not the organization's item), EINVALID (note too long), ECONFLICT (the item is
// not pending: nothing to ask about).
func (s *Service) AskAdmin(ctx context.Context, a Ask) (Asked, error) {
	if utf8.RuneCountInString(a.Note) > MaxNote {
		return Asked{}, apperr.Invalid("ask.invalid", map[string]string{"note": fmt.Sprintf("must be at most %d characters", MaxNote)})
	}
	var out Asked
	err := s.DB.Tx(ctx, func(tx *gorm.DB) error {
		var dl models.DeadLetter
		if err := tx.Select("id, status, updated_at").Where("organization_id = ? AND id = ?", a.OrganizationID, a.DeadLetterID).First(&dl).Error; err != nil {
			if models.IsNotFound(err) {
				return apperr.NotFound("dead letter")
			}
			return err
		}
		if dl.Status != models.DLQPending {
			return &apperr.Error{Code: apperr.ECONFLICT, Message: "dlq.conflict." + dl.Status}
		}
		var prev []models.AuditEntry
		if err := tx.Where("organization_id = ? AND entity_type = ? AND entity_id = ? AND action = ? AND created_at >= ?",
			a.OrganizationID, "dead_letter_queue", dl.ID, "dlq.admin_asked", dl.UpdatedAt).Order("created_at").Limit(1).Find(&prev).Error; err != nil {
			return err
		}
		if len(prev) > 0 {
			out = Asked{Already: true, At: prev[0].CreatedAt}
			return nil
		}
		now := s.now()
		out.At = now
		details := map[string]any{}
		if note := strings.TrimSpace(a.Note); note != "" {
			details["notes"] = note
		}
		if err := audit.Record(tx, audit.Entry{OrganizationID: a.OrganizationID, Actor: a.Actor, Action: "dlq.admin_asked",
			EntityType: "dead_letter_queue", EntityID: dl.ID, At: now, Details: details}); err != nil {
			return err
		}
		_, err := models.InboxAdmins(tx, models.AdminMessage{OrganizationID: a.OrganizationID, Kind: "admin_request", Title: a.Title,
			Body: strings.TrimSpace(a.Note), Link: a.Link, DedupKey: fmt.Sprintf("ask:%s:%d", dl.ID, dl.UpdatedAt.UnixNano()), At: now})
		return err
	})
	return out, err
}

// GroupAsk is an accountant's request to the admins about a failure group: to close (resolve
// or skip) or correct its items, which the organization keeps to its admins.
type GroupAsk struct {
	OrganizationID string
	GroupID        string
	Note           string
	Actor          audit.Actor
	// Title and Link are what the inbox entry shows and links to (the group's page).
	Title, Link string
}

// AskAdminGroup puts a request about a failure group in every admin's inbox, audited
// (dlq.group_admin_asked), as AskAdmin does for one item: the ask stays open until the
// group changes (a new item, a closure, a mute), and asking again while it is open adds
// nothing and says when it was made. Errors: ENOTFOUND (not the organization's group),
// EINVALID (note too long).
func (s *Service) AskAdminGroup(ctx context.Context, a GroupAsk) (Asked, error) {
	if utf8.RuneCountInString(a.Note) > MaxNote {
		return Asked{}, apperr.Invalid("ask.invalid", map[string]string{"note": fmt.Sprintf("must be at most %d characters", MaxNote)})
	}
	var out Asked
	err := s.DB.Tx(ctx, func(tx *gorm.DB) error {
		var g models.Group
		if err := tx.Select("id, updated_at").Where("organization_id = ? AND id = ?", a.OrganizationID, a.GroupID).First(&g).Error; err != nil {
			if models.IsNotFound(err) {
				return apperr.NotFound("group")
			}
			return err
		}
		var prev []models.AuditEntry
		if err := tx.Where("organization_id = ? AND entity_type = ? AND entity_id = ? AND action = ? AND created_at >= ?",
			a.OrganizationID, "dlq_group", g.ID, "dlq.group_admin_asked", g.UpdatedAt).Order("created_at").Limit(1).Find(&prev).Error; err != nil {
			return err
		}
		if len(prev) > 0 {
			out = Asked{Already: true, At: prev[0].CreatedAt}
			return nil
		}
		now := s.now()
		out.At = now
		details := map[string]any{}
		if note := strings.TrimSpace(a.Note); note != "" {
			details["notes"] = note
		}
		if err := audit.Record(tx, audit.Entry{OrganizationID: a.OrganizationID, Actor: a.Actor, Action: "dlq.group_admin_asked",
			EntityType: "dlq_group", EntityID: g.ID, At: now, Details: details}); err != nil {
			return err
		}
		_, err := models.InboxAdmins(tx, models.AdminMessage{OrganizationID: a.OrganizationID, Kind: "admin_request", Title: a.Title,
			Body: strings.TrimSpace(a.Note), Link: a.Link, DedupKey: fmt.Sprintf("askgroup:%s:%d", g.ID, g.UpdatedAt.UnixNano()), At: now})
		return err
	})
	return out, err
}
