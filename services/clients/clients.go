// Package clients reads what the office has open for one client (issue 23): the client's
// failures, the money they hold up and its deadlines with work not done.
package clients

import (
	"context"
	"strings"
	"unicode"
	"unicode/utf8"

	"lifeline/models"
	"lifeline/models/apperr"
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
