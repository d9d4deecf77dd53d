// Package escalation holds an organization's escalation policy (issue 22): the levels a
// problem left pending climbs, each {afterMs, to}: after afterMs pending, the level's people
// (roles of the organization, or members named by id or email) have it. The policy is
// empty by default (no escalation); admins edit it (Service.Save, audited). The pass that
// escalates groups on the database clock is the engine's (engine.Engine.Escalate), which
// reads the policy with Parse.
package escalation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
)

// Bounds of a policy.
const (
	MaxLevels = 10
	// MaxTo bounds the roles and people one level names.
	MaxTo = 20
	// MaxAfter is the longest wait a level may have: a dead letter's retention (30 days).
	MaxAfter = 30 * 24 * time.Hour
)

// Roles are the roles a level may name ("role:admin" includes owners, as everywhere a
// recipient names a role).
var Roles = []string{models.RoleAdmin, models.RoleOwner, models.RoleAccountant}

// Level is one level of a policy: after AfterMs milliseconds pending, To have it. To's
// entries are "role:<role>" (one of Roles), or a member's user id or email.
type Level struct {
	AfterMs int64    `json:"afterMs"`
	To      []string `json:"to"`
}

// After is the level's wait.
func (l Level) After() time.Duration { return time.Duration(l.AfterMs) * time.Millisecond }

// Policy is an organization's levels, in increasing AfterMs.
type Policy struct {
	Levels []Level `json:"levels"`
}

// Parse reads a stored policy (a JSON array of levels). Something unreadable is no policy
// (it was validated when saved).
func Parse(raw json.RawMessage) Policy {
	var lv []Level
	if err := json.Unmarshal(raw, &lv); err != nil || lv == nil {
		return Policy{Levels: []Level{}}
	}
	return Policy{Levels: lv}
}

// Reached is how many levels of p a problem pending for d has reached (0: none).
func (p Policy) Reached(d time.Duration) int {
	n := 0
	for _, l := range p.Levels {
		if d >= l.After() {
			n++
		}
	}
	return n
}

// Field messages (English; the pages translate them).
const (
	msgAfter      = "must be a whole number of milliseconds above 0"
	msgIncreasing = "must be more than the level before"
	msgMaxAfter   = "must be at most 30 days (2592000000)"
	msgToEmpty    = "name at least one role or member"
	msgToMany     = "may name at most 20 roles and members"
	msgToUnknown  = "must be role:admin, role:owner, role:accountant, or a member of the organization"
	msgLevels     = "may have at most 10 levels"
	msgBody       = "must be a JSON object with levels: [{afterMs, to}]"
)

// Validate checks levels against the organization's members (ms): afterMs positive,
// increasing and at most MaxAfter; to non-empty, each a role of Roles or a member (by id or
// email). It returns the levels normalized (a role as "role:<role>", a bare role name too;
// an email as the member's own), and field messages keyed levels[i].afterMs, levels[i].to
// or levels[i].to[j].
func Validate(levels []Level, ms []models.RoleMember) ([]Level, map[string]string) {
	fields := map[string]string{}
	if len(levels) > MaxLevels {
		fields["levels"] = msgLevels
		return levels, fields
	}
	out := make([]Level, len(levels))
	for i, l := range levels {
		key := fmt.Sprintf("levels[%d]", i)
		switch {
		case l.AfterMs <= 0:
			fields[key+".afterMs"] = msgAfter
		case l.AfterMs > MaxAfter.Milliseconds():
			fields[key+".afterMs"] = msgMaxAfter
		case i > 0 && levels[i-1].AfterMs > 0 && l.AfterMs <= levels[i-1].AfterMs:
			fields[key+".afterMs"] = msgIncreasing
		}
		out[i] = Level{AfterMs: l.AfterMs, To: []string{}}
		switch {
		case len(l.To) == 0:
			fields[key+".to"] = msgToEmpty
		case len(l.To) > MaxTo:
			fields[key+".to"] = msgToMany
		}
		for j, t := range l.To {
			n, ok := normalize(strings.TrimSpace(t), ms)
			if !ok {
				fields[fmt.Sprintf("%s.to[%d]", key, j)] = msgToUnknown
				if _, set := fields[key+".to"]; !set {
					fields[key+".to"] = msgToUnknown
				}
				continue
			}
			if !slices.Contains(out[i].To, n) {
				out[i].To = append(out[i].To, n)
			}
		}
	}
	return out, fields
}

// normalize returns entry t as stored: "role:<role>" for a role, the member's user id for
// an id, the member's email for an email; false when it names neither.
func normalize(t string, ms []models.RoleMember) (string, bool) {
	role, _ := strings.CutPrefix(t, "role:")
	if slices.Contains(Roles, role) {
		return "role:" + role, true
	}
	for _, m := range ms {
		if t == m.UserID {
			return m.UserID, true
		}
		if strings.EqualFold(t, m.Email) {
			return m.Email, true
		}
	}
	return "", false
}

// Matches reports whether member m is one of a level's to: a role it has ("role:admin"
// includes owners), its user id or its email.
func Matches(m models.RoleMember, to []string) bool {
	for _, t := range to {
		if role, ok := strings.CutPrefix(t, "role:"); ok {
			if m.Role == role || (role == models.RoleAdmin && m.Role == models.RoleOwner) {
				return true
			}
		} else if t == m.UserID || strings.EqualFold(t, m.Email) {
			return true
		}
	}
	return false
}

// ParseBody reads an API body {"levels": [{"afterMs": n, "to": ["role:admin", …]}]}.
// EINVALID with field messages: not such an object, an unknown key, a value of the wrong
// type.
func ParseBody(raw []byte) (Policy, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var p struct {
		Levels *[]Level `json:"levels"`
	}
	if err := dec.Decode(&p); err != nil || p.Levels == nil || dec.More() {
		field, msg := "body", msgBody
		if te, ok := err.(*json.UnmarshalTypeError); ok && te.Field != "" {
			field, msg = te.Field, "has the wrong type"
		}
		return Policy{}, apperr.Invalid("escalation.invalid", map[string]string{field: msg})
	}
	return Policy{Levels: *p.Levels}, nil
}

// Service reads and saves policies.
type Service struct {
	DB *models.DB
	// Now is the clock of the audit entries (nil: time.Now).
	Now func() time.Time
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// Policy returns the organization's policy (no levels: no escalation).
func (s *Service) Policy(ctx context.Context, orgID string) (Policy, error) {
	raw, err := s.DB.EscalationPolicy(ctx, orgID)
	if err != nil {
		return Policy{}, err
	}
	return Parse(raw), nil
}

// Members lists the organization's members a level may name.
func (s *Service) Members(ctx context.Context, orgID string) ([]models.RoleMember, error) {
	return models.RoleMembersTx(s.DB.Conn(ctx), orgID)
}

// Save validates p against the organization's members and stores it, audited
// (organization.escalation_updated, before and after) when it changes. Errors: EINVALID
// (escalation.invalid) with field messages (Validate's); nothing is stored then.
func (s *Service) Save(ctx context.Context, orgID string, actor audit.Actor, p Policy) (Policy, error) {
	var out Policy
	err := s.DB.Tx(ctx, func(tx *gorm.DB) error {
		ms, err := models.RoleMembersTx(tx, orgID)
		if err != nil {
			return err
		}
		levels, fields := Validate(p.Levels, ms)
		if len(fields) > 0 {
			return apperr.Invalid("escalation.invalid", fields)
		}
		out = Policy{Levels: levels}
		raw, err := json.Marshal(levels)
		if err != nil {
			return err
		}
		before, err := models.EscalationPolicyTx(tx, orgID)
		if err != nil {
			return err
		}
		if bytes.Equal(before, raw) {
			return nil
		}
		if err := models.SetEscalationPolicy(tx, orgID, raw); err != nil {
			return err
		}
		return audit.Record(tx, audit.Entry{OrganizationID: orgID, Actor: actor, Action: "organization.escalation_updated",
			EntityType: "organization", EntityID: orgID, At: s.now(),
			Details: map[string]any{"before": Parse(before).Levels, "after": levels}})
	})
	return out, err
}
