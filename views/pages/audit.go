package pages

// AuditVM feeds Audit (the admins' audit log).
type AuditVM struct {
	Filter    AuditFilter
	Rows      []AuditRow
	NextURL   string // "" on the last page
	ExportURL string // CSV of every entry the filter matches; "" when the filter is refused
	Filtered  bool
	// Error says the filter was refused (422); Filter.Errors has a message per key.
	Error string
}

// AuditFilter is the audit log's filter form; the field names are the query parameters.
type AuditFilter struct {
	Action             string // URL of the page
	Event              string
	Events             []Option
	Actor              string
	Actors             []Option
	EntityType         string
	EntityTypes        []Option
	EntityID, From, To string // From and To: dates (YYYY-MM-DD) in the user's zone
	Errors             map[string]string
}

// AuditRow is one audit event.
type AuditRow struct {
	ID                      string
	Event, Label            string // the machine code, and its label in the user's language
	Actor                   string
	EntityType, EntityLabel string
	EntityID, EntityURL     string // EntityURL: "" when there is no page for it
	At, AtText              string // ISO and display
	Details                 string // JSON, "" when there are none
	Note                    string // what the details add to the label, in a line
}
