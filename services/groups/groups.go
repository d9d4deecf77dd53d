// Package groups serves failure groups (issue 22) to people: the list and one group, with
// their counts, subjects and last day's arrivals; one action on a whole group; splitting an
// item out of its group.
//
// A group action is a bulk job (services/bulk) over the group's pending items at the moment
// it is asked for: the job names them, so an item that joins the group afterwards is not in
// it (its total is the pending count then). Muting is a state change of the group itself
// (engine.Groups.Mute). Groups are made and resolved by the engine, in the transactions of
// the failures and settlements that make or close their items.
package groups

import (
	"context"
	"errors"
	"slices"
	"time"
	"unicode/utf8"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/bulk"
	"lifeline/services/engine"
)

// Actions on a group: the bulk actions, and mute.
const Mute = "mute"

// Actions lists the actions a group takes.
var Actions = []string{bulk.Retry, bulk.RetryFull, bulk.Resolve, bulk.Skip, Mute}

// Engine changes groups' state (the engine).
type Engine interface {
	Mute(ctx context.Context, orgID, groupID string, until time.Time, actor audit.Actor) error
	Split(ctx context.Context, orgID, id string, actor audit.Actor) (string, error)
}

// Bulk starts bulk jobs (bulk.Service).
type Bulk interface {
	CreateOnce(ctx context.Context, r bulk.Request) (*models.BulkJob, bool, error)
}

var (
	_ Engine = engine.Groups{}
	_ Bulk   = (*bulk.Service)(nil)
)

// Service reads groups and acts on them.
type Service struct {
	DB     *models.DB
	Engine Engine
	// Bulk runs the group actions other than mute (nil: they are ENOTFOUND, as the bulk
	// routes are without it).
	Bulk Bulk
}

// List returns the organization's groups matching f (models.DB.ListGroups).
func (s *Service) List(ctx context.Context, orgID string, f models.GroupFilter) ([]models.GroupView, string, error) {
	return s.DB.ListGroups(ctx, orgID, f)
}

// Get returns one of the organization's groups; ENOTFOUND for another organization's.
func (s *Service) Get(ctx context.Context, orgID, id string) (*models.GroupView, error) {
	return s.DB.GetGroup(ctx, orgID, id)
}

// ActRequest asks for one action on a whole group.
type ActRequest struct {
	OrganizationID string
	GroupID        string
	// Action is one of Actions.
	Action string
	Notes  string
	// MuteUntil is when a mute ends (mute only).
	MuteUntil time.Time
	Actor     audit.Actor
	// IdempotencyKey makes a bulk action idempotent (bulk.Request).
	IdempotencyKey string
}

// ActResult is what an action did: the bulk job it started (Replayed when the same key
// gave back an earlier one), or the muted group.
type ActResult struct {
	Job      *models.BulkJob
	Replayed bool
	Group    *models.GroupView
}

// Act runs r. A bulk action covers exactly the group's pending items now (at most
// bulk.MaxItems). Errors: ENOTFOUND for another organization's group (or a bulk action
// without a bulk service); EINVALID on action, resolutionNotes, muteUntil, or on action when
// the group has nothing pending; ECONFLICT when muting a resolved group.
func (s *Service) Act(ctx context.Context, r ActRequest) (*ActResult, error) {
	fields := map[string]string{}
	if !slices.Contains(Actions, r.Action) {
		fields["action"] = "must be one of retry, retry_full, resolve, skip, mute"
	}
	if utf8.RuneCountInString(r.Notes) > engine.MaxNotes {
		fields["resolutionNotes"] = "must be at most 2000 characters"
	}
	switch {
	case r.Action == Mute && r.MuteUntil.IsZero():
		fields["muteUntil"] = "give the time the mute ends (RFC 3339)"
	case r.Action != Mute && !r.MuteUntil.IsZero():
		fields["muteUntil"] = "only a mute takes a time"
	}
	if len(fields) > 0 {
		return nil, apperr.Invalid("group.invalid", fields)
	}
	g, err := s.DB.GetGroup(ctx, r.OrganizationID, r.GroupID)
	if err != nil {
		return nil, err
	}
	if r.Action == Mute {
		if err := s.Engine.Mute(ctx, r.OrganizationID, g.ID, r.MuteUntil, r.Actor); err != nil {
			return nil, err
		}
		g, err := s.DB.GetGroup(ctx, r.OrganizationID, g.ID)
		return &ActResult{Group: g}, err
	}
	if s.Bulk == nil {
		return nil, apperr.NotFound("bulk actions")
	}
	job, replayed, err := s.Bulk.CreateOnce(ctx, bulk.Request{OrganizationID: r.OrganizationID, Action: r.Action,
		Filter: &models.DLQFilter{GroupID: g.ID, Status: models.DLQPending}, Notes: r.Notes, Actor: r.Actor, IdempotencyKey: r.IdempotencyKey})
	if me := (*apperr.Error)(nil); errors.As(err, &me) && me.Code == apperr.EINVALID && me.Fields["filter"] != "" {
		// The group's items, not a filter the caller wrote: say it in the group's terms.
		if g.Counts.Pending == 0 {
			return nil, apperr.Invalid("group.invalid", map[string]string{"action": "the group has no pending items"})
		}
		return nil, apperr.Invalid("group.invalid", map[string]string{"action": me.Fields["filter"]})
	}
	if err != nil {
		return nil, err
	}
	return &ActResult{Job: job, Replayed: replayed}, nil
}

// Split moves the organization's dead letter id into a group of its own and returns that
// group (engine.Groups.Split).
func (s *Service) Split(ctx context.Context, orgID, id string, actor audit.Actor) (*models.GroupView, error) {
	groupID, err := s.Engine.Split(ctx, orgID, id, actor)
	if err != nil {
		return nil, err
	}
	return s.DB.GetGroup(ctx, orgID, groupID)
}

// ProblemSamples is how many of its newest items each group shows on the Problems page.
const ProblemSamples = 5

// Problems returns the organization's groups with items to handle, the most first
// (models.DB.ProblemGroups), and each one's newest ProblemSamples items to handle.
func (s *Service) Problems(ctx context.Context, orgID string) ([]models.GroupView, map[string][]models.GroupSample, error) {
	groups, err := s.DB.ProblemGroups(ctx, orgID)
	if err != nil || len(groups) == 0 {
		return groups, nil, err
	}
	ids := make([]string, len(groups))
	for i, g := range groups {
		ids[i] = g.ID
	}
	samples, err := s.DB.GroupSamples(ctx, orgID, ids, ProblemSamples)
	return groups, samples, err
}
