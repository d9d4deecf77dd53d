// Package clients reads what the office has open for one client (issue 23): the client's
// failures, the money they hold up and its deadlines with work not done.
package clients

import (
	"context"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/deadline"
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
	problems, err := s.db.ProblemGroups(ctx, orgID)
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
