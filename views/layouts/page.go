// Package layouts holds the HTML document shell shared by every full page.
//
// Components here are pure functions of their view models: they import no
// models, services, echo or gorm, and everything a test selects carries a
// data-testid.
package layouts

import (
	"encoding/json"
	"strconv"
)

// NavItem is one entry of the top navigation.
type NavItem struct {
	ID     string // stable, for data-testid="nav-<ID>"
	Label  string
	URL    string
	Active bool // rendered with aria-current="page"
	Badge  int  // a count badge is shown when > 0 (e.g. unresolved dead letters)
}

// Page carries what the layout needs on every full page.
type Page struct {
	Title     string // document title; " · Lifeline" is appended
	OrgName   string
	UserEmail string // empty means logged out: no nav and no user menu
	Role      string
	CSRFToken string // sent by htmx as X-CSRF-Token and in forms as _csrf
	Nav       []NavItem
	LogoutURL string
	Flash     string // one-off notice shown above the content
	// LanguageURL is where the language switch posts; Path is the page to come back to.
	LanguageURL string
	Path        string
	ProfileURL  string // the user's own settings; empty for API principals
	// Bell is the in-app notifications' bell; nil leaves it out.
	Bell *Bell
	// Tabs are the sections of the settings (admins), shown above a settings page's content.
	Tabs []NavItem
}

// CSRFHeaders returns the JSON object for <body hx-headers>, built with
// encoding/json so any quote or angle bracket in the token stays inside the
// JSON string (json.Marshal also escapes <, > and & as \u003c etc.).
func CSRFHeaders(token string) string {
	b, err := json.Marshal(map[string]string{"X-CSRF-Token": token})
	if err != nil { // cannot happen for a map[string]string
		return "{}"
	}
	return string(b)
}

func documentTitle(title string) string {
	if title == "" {
		return "Lifeline"
	}
	return title + " · Lifeline"
}

func badgeText(n int) string {
	if n > 999 {
		return "999+"
	}
	return strconv.Itoa(n)
}

// Bell is the top bar's in-app notifications: the unread count, refreshed every 10 s from
// URL (and at once on the "notifications-changed" event), linking to the list at Link.
type Bell struct {
	URL, Link string
	Unread    int
	Label     string // the accessible name, with the count ("Notifications, 3 unread")
}
