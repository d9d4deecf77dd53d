package pages

// BreakersVM feeds Breakers (the circuit breakers page).
type BreakersVM struct {
	Filter BreakersFilter
	Table  BreakersTable
	// Done names the action just taken ("reset", "open"): a confirmation above the list.
	Done string
	// FormError is an action's refusal that no row of the list can show (the breaker is not
	// in the filtered list).
	FormError string
}

// BreakersFilter is the GET filter form above the breakers. Its field names are the query
// keys of the page and the API: state, workflowId.
type BreakersFilter struct {
	Action     string
	State      string
	WorkflowID string
	States     []Option
	Workflows  []Option
	Errors     map[string]string // by query key, for a 422
}

// BreakersTable is the swappable list of breakers (div#breakers-table). While RefreshURL is
// set it refreshes itself every few seconds, except while an action form is open.
type BreakersTable struct {
	Rows     []BreakerRow
	Filtered bool // picks the empty-state wording
	// Error and FieldErrors say why the filter was refused (422), in place of rows.
	Error       string
	FieldErrors map[string]string
	RefreshURL  string
	// CanAct (admins) shows each row's actions; CSRF and Back (the filter, to come back to)
	// go with their forms.
	CanAct bool
	CSRF   string
	Back   []HiddenField
}

// BreakerRow is one breaker.
type BreakerRow struct {
	ID          string
	State       string // closed | open | half_open
	Forced      bool   // an admin opened it: it stays open until reset
	Reason      string // the admin's reason for the latest reset or forced opening
	Scope       string // step | host
	Workflow    string // step scope: the workflow's name and page
	WorkflowURL string
	Step        string // the step's name from the definition, else its id
	StepID      string
	Host        string // host scope
	// Failures in the last minute, the threshold that opens it, and both as a tooltip.
	Failures         int
	Threshold        int
	FailuresTitle    string
	LastFailureAt    string // ISO; "" never
	LastFailure      string // relative ("3 minutes ago")
	LastFailureTitle string // in the user's zone
	OpenedAt         string // ISO; "" when closed
	OpenedAtText     string // in the user's zone
	// HalfOpen is when it lets trial attempts through: relative ("in 42 seconds"), or why
	// not (forced: "when reset"; due: "at the next attempt"). HalfOpenAt is ISO, HalfOpenTitle the
	// time in the user's zone.
	HalfOpenAt    string
	HalfOpen      string
	HalfOpenTitle string
	Waiting       int
	WaitingTitle  string
	// Actions (admins): empty URLs are not offered in this state.
	ResetURL string
	OpenURL  string
	Form     BreakerForm
}

// BreakerForm is a row's action form: the reason, and a refusal (422) to show under it.
type BreakerForm struct {
	Open   bool // shown expanded (after a refusal)
	Reason string
	Error  string
}

// breakerTone is the colour of a breaker state: closed ok, open danger, half-open warn.
func breakerTone(state string) string {
	switch state {
	case "open":
		return "danger"
	case "half_open":
		return "warn"
	case "closed":
		return "ok"
	}
	return "neutral"
}

// waitsOnBreaker reports whether a step's latest attempt waits on an open circuit breaker
// (its timeline entry starts expanded, to say until when).
func waitsOnBreaker(s StepVM) bool {
	return len(s.Attempts) > 0 && s.Attempts[len(s.Attempts)-1].BreakerWait != ""
}
