package pages

// HealthVM feeds Health (the admins' health page).
type HealthVM struct {
	// DatabaseUp: the engine's database answers.
	DatabaseUp bool
	// Rows are the organization's quarantined rows, newest first.
	Rows []QuarantineRow
	CSRF string
}

// QuarantineRow is one row the reconciler left out.
type QuarantineRow struct {
	ID           string
	What         string // "step attempt" or "compensation", in the reader's language
	ExecutionID  string // short, for display
	ExecutionURL string // "" when the row names no execution
	Reason       string
	At, AtISO    string
	ReleaseURL   string
}

// boolAttr is "true" or "false", for data attributes.
func boolAttr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
