// Package clients reads what the office has open for one client (issue 23): the client's
// failures, the money they hold up and its deadlines with work not done.
package clients

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/deadline"
	"lifeline/services/redact"
)

// Service reads clients of an organization.
type Service struct{ db *models.DB }

// New returns the service on db.
func New(db *models.DB) *Service { return &Service{db: db} }

// MaxKey bounds a client's key (a rendered settings.client).
const MaxKey = 200

// Overview returns the organization's overview of the client with key: ENOTFOUND when the
// key is not one (empty, too long, control characters) or no execution is about it.
func (s *Service) Overview(ctx context.Context, orgID, key string) (*models.ClientOverview, error) {
	if key = strings.TrimSpace(key); key == "" || utf8.RuneCountInString(key) > MaxKey || !utf8.ValidString(key) ||
		strings.IndexFunc(key, unicode.IsControl) >= 0 {
		return nil, apperr.NotFound("client")
	}
	o, err := s.db.Client(ctx, orgID, key)
	if err != nil {
		return nil, err
	}
	rules, err := s.db.DeadlineRules(ctx, orgID)
	if err != nil {
		return nil, err
	}
	o.RiskWorkingDays = rules.RiskWorkingDays
	return o, nil
}

// Today is an accountant's morning on one screen (issue 23): the obligations due within the
// organization's at-risk working days (overdue ones included) with work not done, the
// clients whose failures hold up the most money, the top problems, and what she asked admins
// for in the last 14 days.
type Today struct {
	Day             time.Time // today, in Poland
	RiskWorkingDays int
	Due             []models.DueGroup
	Money           []models.ClientMoney
	Problems        []models.GroupView
	Requests        []models.MyRequest
}

// Bounds of the Today page's lists.
const (
	TodayDue      = 12
	TodayMoney    = 8
	TodayProblems = 5
	TodayRequests = 8
)

// Today returns the organization's morning for userID at now.
func (s *Service) Today(ctx context.Context, orgID, userID string, now time.Time) (*Today, error) {
	rules, err := s.db.DeadlineRules(ctx, orgID)
	if err != nil {
		return nil, err
	}
	t := &Today{Day: deadline.Day(now), RiskWorkingDays: rules.RiskWorkingDays}
	horizon := deadline.AddWorkingDays(t.Day, rules.RiskWorkingDays).Format(time.DateOnly)
	if t.Due, err = s.db.DueBy(ctx, orgID, horizon, TodayDue); err != nil {
		return nil, err
	}
	if t.Money, err = s.db.StuckByClient(ctx, orgID, TodayMoney); err != nil {
		return nil, err
	}
	problems, err := s.db.ProblemGroups(ctx, orgID, TodayProblems)
	if err != nil {
		return nil, err
	}
	t.Problems = problems[:min(len(problems), TodayProblems)]
	if userID != "" {
		if t.Requests, err = s.db.MyRequests(ctx, orgID, userID, now.AddDate(0, 0, -14), TodayRequests); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// FieldValue is a value the client's other executions gave an input field, and how many
// of them did.
type FieldValue struct {
	Value string
	Count int
}

// Bounds of FieldValues: the executions read, the values returned.
const (
	fieldSample    = 50
	maxFieldValues = 3
)

// FieldValues returns the values the organization's other executions about client (the
// newest fieldSample of them, not exceptID) hold in the top-level input field, other than
// current, the most frequent first (at most maxFieldValues): what an accountant correcting
// a client's NIP typed wrong needs, the NIP its other runs carry. Only text and numbers are
// read: a sealed secret is an object, and a field named like a secret (redact's default
// keys) gives nothing.
func (s *Service) FieldValues(ctx context.Context, orgID, client, field, exceptID, current string) ([]FieldValue, error) {
	if client == "" || field == "" || redact.New(nil).Match(field) {
		return nil, nil
	}
	inputs, err := s.db.ClientInputs(ctx, orgID, client, exceptID, fieldSample)
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	var order []string
	for _, in := range inputs {
		var m map[string]any
		if json.Unmarshal(in, &m) != nil {
			continue
		}
		var v string
		switch x := m[field].(type) {
		case string:
			v = strings.TrimSpace(x)
		case float64:
			v = strconv.FormatFloat(x, 'f', -1, 64)
		}
		if v == "" || v == current || v == redact.Placeholder {
			continue
		}
		if counts[v] == 0 {
			order = append(order, v)
		}
		counts[v]++
	}
	slices.SortStableFunc(order, func(a, b string) int { return counts[b] - counts[a] })
	var out []FieldValue
	for _, v := range order[:min(len(order), maxFieldValues)] {
		out = append(out, FieldValue{Value: v, Count: counts[v]})
	}
	return out, nil
}
