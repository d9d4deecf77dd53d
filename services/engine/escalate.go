package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/services/audit"
	"lifeline/services/escalation"
	"lifeline/services/notify"
)

// Escalation of problems left pending (issue 22): a periodic pass (services/jobs,
// EscalateArgs) on the database clock. A failure group is pending since the oldest of its
// pending items was dead-lettered, or since it was reopened if that is later (a reopened
// group starts again from level 0); while it is open (not resolved, not muted), the levels
// of its organization's policy whose wait that has passed are reached. A group that reached
// a level it had not is raised to it by a guarded update (EscalateGroup), which is what
// makes each level told once: in the same transaction its items' error records become
// escalated, the change is audited (dlq.group_escalated), and each level reached is told to
// its people: one message per level and pass naming every group that reached it. A group
// that reaches two levels in one pass is named in both levels' messages. Resolving the
// group ends its escalation (ResolveGroupIfDone). Items not in any group (made before
// groups, until the start's backfill groups them) are not escalated.

// EscalationResult counts what Escalate changed.
type EscalationResult struct {
	// Groups counts the groups raised to a higher level; Errors the error records that
	// became escalated.
	Groups int
	Errors int
}

// escalationCandidate is a group of an organization with items pending, and how many
// levels of the policy it has reached.
type escalationCandidate struct {
	ID           string
	Title        string
	WorkflowID   string
	WorkflowName string
	Level        int
	Reached      int
	Pending      int
	// Since is when it began waiting (read for the groups raised).
	Since time.Time `gorm:"-"`
}

// Escalate runs one escalation pass over every organization with a policy. Safe to run at
// any time on any number of processes: a level is raised (and told) by one of them.
func (e *maintenance) Escalate(ctx context.Context) (EscalationResult, error) {
	var res EscalationResult
	policies, err := e.db.EscalationPolicies(ctx)
	if err != nil {
		return res, err
	}
	orgs := make([]string, 0, len(policies))
	for org := range policies {
		orgs = append(orgs, org)
	}
	sort.Strings(orgs)
	for _, org := range orgs {
		p := escalation.Parse(policies[org])
		if len(p.Levels) == 0 {
			continue
		}
		r, err := e.escalateOrg(ctx, org, p)
		res.Groups += r.Groups
		res.Errors += r.Errors
		if err != nil {
			return res, fmt.Errorf("escalate organization %s: %w", org, err)
		}
	}
	return res, nil
}

// escalateOrg escalates one organization's groups under policy p, in one transaction.
func (e *maintenance) escalateOrg(ctx context.Context, orgID string, p escalation.Policy) (EscalationResult, error) {
	var res EscalationResult
	now, err := e.now(ctx)
	if err != nil {
		return res, err
	}
	cands, err := e.escalationCandidates(ctx, orgID, p, now)
	if err != nil {
		return res, err
	}
	err = e.db.Tx(ctx, func(tx *gorm.DB) error {
		res = EscalationResult{}
		st := stateTx{tx: tx, now: now}
		// byLevel: the groups that reached each level in this pass.
		byLevel := map[int][]escalationCandidate{}
		for _, c := range cands {
			if c.Reached <= c.Level {
				continue
			}
			who, err := json.Marshal(p.Levels[c.Reached-1].To)
			if err != nil {
				return err
			}
			won, err := st.groups().EscalateGroup(orgID, c.ID, c.Level, c.Reached, string(who))
			if err != nil {
				return err
			}
			if !won {
				continue // another pass raised it, or it closed since it was read
			}
			res.Groups++
			if c.Since, err = pendingSince(tx, c.ID); err != nil {
				return err
			}
			for l := c.Level + 1; l <= c.Reached; l++ {
				byLevel[l] = append(byLevel[l], c)
			}
			if err := audit.Record(tx, audit.Entry{OrganizationID: orgID, Actor: audit.System, Action: "dlq.group_escalated",
				EntityType: "dlq_group", EntityID: c.ID, At: now,
				Details: map[string]any{"from": c.Level, "level": c.Reached, "to": p.Levels[c.Reached-1].To, "pending": c.Pending}}); err != nil {
				return err
			}
		}
		// The error records of every escalated group's waiting items: those just raised,
		// and items that joined a group escalated before.
		var escalated []string
		if err := tx.Model(&models.Group{}).Where("organization_id = ? AND escalation_level > 0", orgID).Pluck("id", &escalated).Error; err != nil {
			return err
		}
		n, err := st.errors().EscalateErrors(orgID, escalated)
		if err != nil {
			return err
		}
		res.Errors = int(n)
		if len(byLevel) == 0 {
			return nil
		}
		ms, err := models.RoleMembersTx(tx, orgID)
		if err != nil {
			return err
		}
		levels := make([]int, 0, len(byLevel))
		for l := range byLevel {
			levels = append(levels, l)
		}
		sort.Ints(levels)
		for _, l := range levels {
			if err := e.tellEscalation(tx, orgID, l, p.Levels[l-1], byLevel[l], ms, now); err != nil {
				return err
			}
		}
		return nil
	})
	return res, err
}

// escalationCandidates reads the organization's open groups with pending items below the
// policy's last level, with how many levels each has reached at now: a level of wait w is
// reached when the oldest pending item was dead-lettered, and the group (re)opened, at or
// before now − w. One query; the comparisons are the database's, on bound times.
func (e *maintenance) escalationCandidates(ctx context.Context, orgID string, p escalation.Policy, now time.Time) ([]escalationCandidate, error) {
	sel := "g.id, g.title, g.workflow_id, w.name AS workflow_name, g.escalation_level AS level, COUNT(*) AS pending, 0"
	var args []any
	for _, l := range p.Levels {
		cut := now.Add(-l.After())
		sel += " + CASE WHEN MIN(d.created_at) <= ? AND (g.reopened_at IS NULL OR g.reopened_at <= ?) THEN 1 ELSE 0 END"
		args = append(args, cut, cut)
	}
	sel += " AS reached"
	var out []escalationCandidate
	err := e.db.Conn(ctx).Table("dlq_groups g").Select(sel, args...).
		Joins("JOIN dead_letter_queue d ON d.group_id = g.id AND d.organization_id = g.organization_id AND d.status = ?", models.DLQPending).
		Joins("LEFT JOIN workflows w ON w.id = g.workflow_id AND w.organization_id = g.organization_id").
		Where("g.organization_id = ? AND g.escalation_level < ? AND (g.state = ? OR (g.state = ? AND g.muted_until <= ?))",
			orgID, len(p.Levels), models.GroupOpen, models.GroupMuted, now).
		Group("g.id, g.title, g.workflow_id, w.name, g.escalation_level, g.reopened_at").
		Order("g.id").Scan(&out).Error
	return out, err
}

// tellEscalation tells level l's people (and the organization's Slack and Teams) that the
// groups gs reached it: one event, in tx. A notification that cannot be recorded is rolled
// back alone and logged (as emit does); the escalation stands.
func (e *maintenance) tellEscalation(tx *gorm.DB, orgID string, l int, level escalation.Level, gs []escalationCandidate, ms []models.RoleMember, now time.Time) error {
	if e.notifier == nil {
		return nil
	}
	esc := notify.Escalation{OrganizationID: orgID, Level: l, AfterMs: level.AfterMs, At: now}
	for _, m := range ms {
		if escalation.Matches(m, level.To) {
			esc.People = append(esc.People, notify.Person{UserID: m.UserID, Email: m.Email})
		}
	}
	for _, g := range gs {
		esc.Groups = append(esc.Groups, notify.EscalatedGroup{ID: g.ID, Title: g.Title, WorkflowID: g.WorkflowID,
			WorkflowName: g.WorkflowName, Pending: g.Pending, Since: g.Since})
	}
	if err := tx.SavePoint("escalation").Error; err != nil {
		return err
	}
	err := e.notifier.EmitEscalation(tx, esc)
	if err == nil {
		return nil
	}
	if rerr := tx.RollbackTo("escalation").Error; rerr != nil {
		return rerr
	}
	e.log.Warn("an escalation could not be notified; the groups are escalated without it", "organization_id", orgID, "level", l, "err", err)
	return nil
}

// pendingSince is when the group groupID began waiting: its oldest pending item's arrival,
// or its reopening if that is later.
func pendingSince(tx *gorm.DB, groupID string) (time.Time, error) {
	var d models.DeadLetter
	if err := tx.Select("created_at").Where("group_id = ? AND status = ?", groupID, models.DLQPending).
		Order("created_at").Limit(1).Find(&d).Error; err != nil {
		return time.Time{}, err
	}
	var g models.Group
	if err := tx.Select("reopened_at").Where("id = ?", groupID).First(&g).Error; err != nil {
		return time.Time{}, err
	}
	if g.ReopenedAt != nil && g.ReopenedAt.After(d.CreatedAt) {
		return g.ReopenedAt.UTC(), nil
	}
	return d.CreatedAt.UTC(), nil
}
