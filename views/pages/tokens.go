package pages

// TokensVM feeds Tokens (the admins' API tokens page).
type TokensVM struct {
	Rows []TokenRow
	Form TokenForm
	// Created is the plain text of a token just created: shown once.
	Created     string
	CreatedName string
	// OrgID is the organization's id, which API calls and the command line name.
	OrgID string
	// APIDocURL is the API's OpenAPI document (/api/v1/openapi.json).
	APIDocURL string
}

// TokenRow is one API token.
type TokenRow struct {
	ID, Name, Role     string
	CreatedAt, Created string // ISO and display
	LastUsed           string // display; "Never"
	Expires            string // display; "Never"
	Status             string // "active", "expired", "revoked"
	StatusText         string // the status in the user's language
	RevokeURL          string // empty when it cannot be revoked
}

// TokenForm is the "New API token" form.
type TokenForm struct {
	Action    string
	Name      string
	Role      string
	Expires   string // "30", "90", "365", "never"
	Roles     []Option
	ExpiresIn []Option
	Errors    map[string]string
	FormError string
}
