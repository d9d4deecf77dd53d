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
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/bulk"
	"lifeline/services/engine"
	"lifeline/services/redact"
)

// Actions on a group: the bulk actions, and mute.
const Mute = "mute"

// Actions lists the actions a group takes.
var Actions = []string{bulk.Retry, bulk.RetryFull, bulk.Resolve, bulk.Skip, bulk.EditRetry, Mute}

// Engine changes groups' state (the engine).
type Engine interface {
	Mute(ctx context.Context, orgID, groupID string, until time.Time, actor audit.Actor) error
	Split(ctx context.Context, orgID, id string, actor audit.Actor) (string, error)
	// Redactor says which input keys are secrets (engine.Groups.Redactor).
	Redactor() *redact.Redactor
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
	// Field and Value: the input field an edit_retry sets on every pending item, and to what.
	Field string
	Value any
	Actor audit.Actor
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
		fields["action"] = "must be one of retry, retry_full, resolve, skip, edit_retry, mute"
	}
	switch {
	case r.Action == bulk.EditRetry && !bulk.ValidPath(r.Field):
		fields["field"] = "give the input field to set (a path of keys, e.g. clientNip)"
	case r.Action == bulk.EditRetry && r.Value == nil:
		fields["value"] = "give the field's new value"
	case r.Action != bulk.EditRetry && (r.Field != "" || r.Value != nil):
		fields["field"] = "only edit_retry sets a field"
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
	br := bulk.Request{OrganizationID: r.OrganizationID, Action: r.Action,
		Filter: &models.DLQFilter{GroupID: g.ID, Status: models.DLQPending}, Notes: r.Notes, Actor: r.Actor, IdempotencyKey: r.IdempotencyKey}
	if r.Action == bulk.EditRetry {
		br.Edit = &bulk.Edit{Field: r.Field, Value: r.Value}
	}
	job, replayed, err := s.Bulk.CreateOnce(ctx, br)
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
	groups, err := s.DB.ProblemGroups(ctx, orgID, models.MaxProblems)
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

// FieldValue is one value a field has among a group's pending items, and on how many.
type FieldValue struct {
	Value string
	Count int
}

// FieldValues returns the distinct values of the input field at path among the group's
// pending items (the most common first; each as compact JSON, a string as itself), and how
// many of them have no such field. Another organization's group has no items.
func (s *Service) FieldValues(ctx context.Context, orgID, groupID, path string) ([]FieldValue, int, error) {
	inputs, err := s.pendingInputs(ctx, orgID, groupID)
	if err != nil {
		return nil, 0, err
	}
	counts, missing := map[string]int{}, 0
	for _, raw := range inputs {
		var doc any
		_ = json.Unmarshal(raw, &doc)
		v, ok := bulk.GetPath(doc, path)
		if !ok {
			missing++
			continue
		}
		counts[valueText(v)]++
	}
	out := make([]FieldValue, 0, len(counts))
	for v, n := range counts {
		out = append(out, FieldValue{Value: v, Count: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Value < out[j].Value
	})
	return out, missing, nil
}

// EditableFields are the input fields of the group's pending items that its title names
// (as a whole word: "clientNip: NIP … must have 10 digits" names clientNip), that every one
// of them has and that are not secrets: the fields a group edit offers. None when the items
// are about more than one client ([Service.PendingClients]): one value set for all of them
// would give each client another's NIP or address.
func (s *Service) EditableFields(ctx context.Context, orgID string, g *models.GroupView) ([]string, error) {
	if g.Counts.Pending == 0 {
		return nil, nil
	}
	clients, err := s.PendingClients(ctx, orgID, g.ID)
	if err != nil || len(clients) > 1 {
		return nil, err
	}
	inputs, err := s.pendingInputs(ctx, orgID, g.ID)
	if err != nil || len(inputs) == 0 {
		return nil, err
	}
	red := s.Engine.Redactor()
	var out []string
	var first any
	_ = json.Unmarshal(inputs[0], &first)
	for _, p := range leafPaths(first, "") {
		last := p[strings.LastIndex(p, ".")+1:]
		if !wordIn(g.Title, last) || bulk.Masked(red, p) {
			continue
		}
		all := true
		for _, raw := range inputs[1:] {
			var doc any
			_ = json.Unmarshal(raw, &doc)
			if _, ok := bulk.GetPath(doc, p); !ok {
				all = false
				break
			}
		}
		if all {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out, nil
}

// PendingClients returns the distinct clients (the workflow's settings.client) of the
// group's pending items, sorted; items without a client are not counted. Another
// organization's group has none.
func (s *Service) PendingClients(ctx context.Context, orgID, groupID string) ([]string, error) {
	var clients []string
	err := s.DB.Conn(ctx).Model(&models.DeadLetter{}).Distinct("client").
		Where("organization_id = ? AND group_id = ? AND status = ? AND client IS NOT NULL", orgID, groupID, models.DLQPending).
		Order("client").Limit(bulk.MaxItems).Pluck("client", &clients).Error
	return clients, err
}

// pendingInputs reads the inputs of the group's pending items' executions (at most
// bulk.MaxItems).
func (s *Service) pendingInputs(ctx context.Context, orgID, groupID string) ([]json.RawMessage, error) {
	var rows []struct{ Input []byte }
	err := s.DB.Conn(ctx).Table("dead_letter_queue d").Select("e.input").
		Joins("JOIN workflow_executions e ON e.id = d.execution_id").
		Where("d.organization_id = ? AND d.group_id = ? AND d.status = ?", orgID, groupID, models.DLQPending).
		Limit(bulk.MaxItems).Scan(&rows).Error
	out := make([]json.RawMessage, len(rows))
	for i, r := range rows {
		out[i] = r.Input
	}
	return out, err
}

// leafPaths lists the paths of the non-object values of a decoded JSON object.
func leafPaths(doc any, prefix string) []string {
	m, ok := doc.(map[string]any)
	if !ok {
		return nil
	}
	var out []string
	for k, v := range m {
		if !bulk.ValidPath(k) {
			continue
		}
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		if sub, ok := v.(map[string]any); ok {
			out = append(out, leafPaths(sub, p)...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// wordIn reports whether text names word as a whole word.
func wordIn(text, word string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], word)
		if j < 0 {
			return false
		}
		at := i + j
		end := at + len(word)
		if (at == 0 || !isWordByte(text[at-1])) && (end == len(text) || !isWordByte(text[end])) {
			return true
		}
		i = at + 1
	}
}

func isWordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// valueText is a JSON value as a person reads it: a string as itself, anything else as
// compact JSON.
func valueText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}
