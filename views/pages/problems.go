package pages

// ProblemsVM feeds Problems: the organization's failure groups with items to handle, the
// most of them first (issue 22).
type ProblemsVM struct {
	// Deadlines is the banner of obligations at risk (issue 23).
	Deadlines []DeadlineAlert
	Groups    []ProblemGroup
	// ListURL is the list of every item, one group at a time or all.
	ListURL string
	// CanAct (accountants and above) shows each group's action; BulkURL and CSRF go with it
	// (the bulk confirmation of the DLQ list).
	CanAct bool
	// AdminOnly: the organization keeps closing and correcting items to its admins and the
	// reader is not one (each group says so where it would offer a correction).
	AdminOnly bool
	BulkURL   string
	CSRF      string
	// CredentialsURL, for admins, is where they replace the organization's credentials (the
	// cure of an authorization problem); "" for the others, who ask an admin.
	CredentialsURL string
	// RefreshURL is this page, which the live refresh asks for again.
	RefreshURL string
}

// ProblemGroup is one failure group, display-ready.
type ProblemGroup struct {
	ID string
	// URL is the group's page.
	URL         string
	Title       string
	Workflow    string
	WorkflowURL string
	Step        string
	ErrorType   string // the type's id (components.ErrorTypeChip)
	// FixData: a retry would repeat the error (validation): the first action is to correct
	// the data on the group's page, and a plain retry comes second. Not for permanent errors:
	// some are cured by time (an invoice not yet in KSeF), not by editing.
	FixData bool
	// FullFirst: every pending item's execution was rolled back, so a retry from the failed
	// step would refuse them all: the action is "retry the whole workflow" (retry_full).
	// Refusals, for a group with some rolled back, says how many each retry would refuse.
	FullFirst bool
	Refusals  []string
	// Credentials: the service refused the office's credentials (authorization): a retry
	// repeats the error until an admin replaces them, which the card says first.
	Credentials bool
	// PeriodClosed: the items' period is closed (validation / period_closed): the service
	// never saw the data, so "the service refuses the data" would be false; the card says
	// what an office does instead (move the item to an open period, ask for a reopen, close).
	PeriodClosed bool
	// State is open, fixing, muted or resolved; StateText says it, Badge is its badge's class.
	State     string
	StateText string
	Badge     string
	// Counts, in words ("25 oczekujących"), and as numbers.
	Pending, Processing, Closed int
	PendingText                 string
	ProcessingText              string
	ClosedText                  string
	Subjects                    []string
	// DueText is the nearest due date of the items to handle and how many are at risk ("" when
	// none has a due date); DueUrgency its urgency (overdue, due_today, at_risk, later).
	DueText, DueUrgency       string
	FirstSeen, FirstSeenTitle string // relative, and in the user's zone
	FirstSeenAt               string // ISO
	LastSeen, LastSeenTitle   string
	LastSeenAt                string
	// CameBack says when the group was resolved before it came back, and why (a new failure,
	// or an item an admin reopened); "" if it did not.
	CameBack string
	// MutedUntil says until when it is muted ("" unless muted).
	MutedUntil string
	// Escalated: the group reached a level of the escalation policy; EscalatedBadge says
	// which ("Eskalacja 2"), Escalation who has it now and since when (the group's page).
	Escalated      bool
	EscalatedBadge string
	Escalation     string
	Spark          Sparkline
	// Items are its newest items to handle; ItemsURL lists them all (ItemsText says how many).
	Items     []ProblemItem
	ItemsURL  string
	ItemsText string
}

// Sparkline is a group's arrivals per hour over the last 24 hours, as bars of an inline SVG
// (Width × Height); Label says it in words for screen readers.
type Sparkline struct {
	Bars          []SparkBar
	Width, Height int
	Label         string
}

// SparkBar is one hour's bar.
type SparkBar struct {
	X, Y, W, H int
	Title      string
}

// ProblemItem is one item of a group.
type ProblemItem struct {
	URL    string
	Title  string
	Reason string
	Age    string
	At     string // ISO
	Status string
}

// GroupVM feeds Group: one failure group's page.
type GroupVM struct {
	Group ProblemGroup
	// Table lists its items as the DLQ list does (no selection; NextURL pages on).
	Table       DLQVM
	ProblemsURL string
	// CanAct (accountants and above, something pending) shows the actions: the bulk
	// confirmation at BulkURL, the mute form at MuteURL with its presets, and the edits.
	CanAct bool
	// CanFix: resolve, skip and correct too (admins; accountants unless the organization's
	// rule keeps them to admins).
	CanFix bool
	// AskURL, when the reader may not close or correct, or the cure is an admin's (new
	// credentials): "ask an admin" about the group.
	AskURL string
	// CredentialsURL, for admins of an authorization problem: where to replace the
	// credentials.
	CredentialsURL string
	BulkURL        string
	MuteURL        string
	MutePresets    []Option
	Edits          []GroupEdit
	// ManyClients says why no field is corrected once for the whole group: its items are
	// about several clients ("" otherwise).
	ManyClients string
	CSRF        string
	// Done says what was just done ("muted", "asked", "already"), if anything.
	Done string
	// Poison: values of its items' inputs that break runs, or are quarantined.
	Poison []PoisonFlag
}

// GroupEdit is the correction of one input field the group's reason names: its current
// values among the pending items, with counts. Money: the workflow moves money and the
// person is not an admin: the edit is refused, and the form says so instead.
type GroupEdit struct {
	Field  string
	Values []GroupFieldValue
	Money  bool
}

// GroupFieldValue is one current value of a field and on how many items ("6 oczekujących").
type GroupFieldValue struct{ Value, Count string }
