package pages

// ProfileVM feeds Profile (a user's own settings).
type ProfileVM struct {
	Action    string
	Email     string
	OrgID     string   // the organization's id, which the command line and API tokens name
	Admin     bool     // the user is an admin: the page shows the command line that makes a token
	Language  string   // "", "pl", "en" ("": the organization's)
	TimeZone  string   // an IANA name; "": the organization's
	OrgLang   string   // display: the organization's language, or the browser's
	OrgZone   string   // display: the organization's time zone, or UTC
	Zones     []string // suggestions for the time zone field
	Now       string   // the current time as the user will see times
	Saved     bool
	Errors    map[string]string
	FormError string
	// Org is the organization's defaults, for admins (nil otherwise).
	Org *OrgLocaleForm
}

// OrgLocaleForm sets the organization's default language and time zone.
type OrgLocaleForm struct {
	Action    string
	Language  string
	TimeZone  string
	Saved     bool
	Errors    map[string]string
	FormError string
}
