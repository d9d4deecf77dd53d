package pages

// PeriodsVM feeds Periods (the admins' closed periods page, issue 23).
type PeriodsVM struct {
	Rows []PeriodRow
	// Form closes a period.
	Form PeriodForm
	// Done confirms what just happened: "closed", "reopened" or "" (nothing); DonePeriod
	// names the period, DoneID the row just closed.
	Done, DonePeriod, DoneID string
	// CSRF is the token of the rows' forms.
	CSRF string
}

// PeriodRow is one closed period.
type PeriodRow struct {
	ID, Period string
	// Client is the client's key; AllClients when the period is closed for every client.
	Client     string
	AllClients bool
	Note       string
	// ClosedBy is who closed it, as shown.
	ClosedBy string
	// ClosedAt, ClosedAtText and ClosedAtRelative are when (ISO, display, "3 days ago").
	ClosedAt, ClosedAtText, ClosedAtRelative string
	// ReopenURL reopens it (a POST, after a confirmation).
	ReopenURL string
	// Fresh marks the row just closed.
	Fresh bool
}

// PeriodForm closes a period for one client or every client.
type PeriodForm struct {
	Action               string
	Period, Client, Note string
	Errors               map[string]string
	FormError            string
}
