package models

import "time"

// InterventionLink is a single-use e-mail link to a request, for one user (a row of
// intervention_links): its token is stored hashed (TokenHash, SHA-256 hex), and it expires
// with the request. UsedAt is set by the answer that used it, in that answer's commit.
type InterventionLink struct {
	ID             string
	OrganizationID string
	InterventionID string
	UserID         string
	TokenHash      string
	ExpiresAt      time.Time
	UsedAt         *time.Time
	CreatedAt      time.Time
}

// TableName is intervention_links.
func (InterventionLink) TableName() string { return "intervention_links" }
