package pages

// DLQItemVM feeds DLQItem (one dead letter: its error context and the recovery actions).
type DLQItemVM struct {
	Row               DLQRow
	Title             string // the execution's subject, or its short id
	ErrorCode         string
	StackTrace        string
	OriginalInputJSON string
	StepStatesJSON    string
	ManualRetries     int
	ListURL           string // the dead-letter list, for the breadcrumb; empty = plain text
	// GroupURL and GroupTitle name the failure group the item belongs to ("" without one);
	// SplitURL moves it to a group of its own ("" when the person may not).
	GroupURL, GroupTitle, SplitURL string
	Steps                          []DLQStepVM
	// Processing: a replay runs; the page refreshes itself (RefreshURL) and links to it.
	Processing bool
	// Running, while a replay runs, is the replay's step that runs or waits for its next
	// attempt, as the execution's page shows it ("Attempt 2 of 5 · next at 08:14:07 · in
	// 12 s"); nil before the replay's first step starts.
	Running    *StepVM
	RefreshURL string
	ReplayURL  string
	// Set once resolved or skipped.
	ResolutionNotes string
	ResolvedAt      string
	ResolvedAtText  string
	// Closed: how the item was closed (dlq.closed.* key), and who closed it.
	Closed, ClosedBy string
	// SucceededURL: the execution whose success closed the item (a replay that succeeded).
	SucceededURL string
	// History: what happened to the item, oldest first; HistoryURL: the audit log filtered
	// to it ("" for those who cannot read the audit log).
	History    []AuditRow
	HistoryURL string
	// Recovery is nil when nothing can be done (not pending, or a viewer).
	Recovery *RecoveryVM
	// Notice: why an action was refused when the actions are no longer shown (409).
	Notice string
	// Done names the action just taken (a confirmation), or how a replay ended
	// (succeeded, or failedagain: DoneFailed, a warning).
	Done       string
	DoneFailed bool
	// Change is the item's input change waiting for an admin's approval, or the last one,
	// rejected (nil: none).
	Change *ChangeVM
	// ReopenURL reopens an item closed by hand (admins, within its retention); "" hides it.
	ReopenURL string
	CSRF      string
	// AskNotice says an ask was sent, or when the open one was made.
	AskNotice string
	// Poison: the input's values that break runs, or are quarantined.
	Poison []PoisonFlag
}

// ChangeVM is an input-change request on the item page.
type ChangeVM struct {
	ID, Status                   string
	RequestedBy                  string
	RequestedAt, RequestedAtText string
	Notes                        string
	Diff                         []DiffLine
	DecidedBy                    string
	DecidedAt, DecidedAtText     string
	DecisionNotes                string
	// ApproveURL and RejectURL: the admins' forms of a pending request ("" hides them).
	ApproveURL, RejectURL, CSRF string
}

// AskVM is the "ask an admin" form.
type AskVM struct {
	URL, CSRF string
}

// DLQStepVM is one step of the failed execution's timeline, as it was when it failed.
type DLQStepVM struct {
	Index      int
	ID         string
	Name       string
	Status     string
	Attempts   int
	Failed     bool
	Error      string
	InputJSON  string
	OutputJSON string
	Breaker    string // the circuit breaker's state when the step failed
	BreakerURL string
}

// RecoveryVM is the actions panel of a pending dead letter. Every form posts to Action with
// a field "action": retry, resume, full, edit, skip_step, resolve, skip.
type RecoveryVM struct {
	Action   string
	CSRF     string
	CanAdmin bool // the retry-policy override (everyone who sees the panel fixes data)
	// NoteRequired: skipping the step or closing the item needs a note (accountants).
	NoteRequired bool
	// FixData: the error is one a plain retry repeats (validation, permanent): editing the
	// input comes first, open, and the retry is not the primary action.
	FixData bool
	// Credentials: the service refused the organization's credentials (authorization): an
	// admin must replace them (CredentialsURL, admins only; "" for others), then a retry
	// goes through.
	Credentials    bool
	CredentialsURL string
	FailedStepName string
	ResumeSteps    []Option // the failed step and the steps before it
	Version        int      // the version the execution ran
	LatestVersion  int
	// RolledBack: the execution's completed steps were undone (or are being): retries warn.
	RolledBack string
	// DataRefused: the service refused the data itself (validation, or a closed period):
	// even a rolled-back item's whole-workflow retry repeats the failure, so the input's
	// editor comes first and that retry is not the primary action. (A rolled-back permanent
	// failure, an invoice not yet in KSeF, keeps the whole-workflow retry first.)
	DataRefused bool
	// RollbackURL starts a rollback of the completed steps (admins, when one of them has a
	// compensation and none ran yet); "" hides it.
	RollbackURL string
	Form        RecoveryForm
	// JSONForm: the input, skip output and policy override shown as fields (forms.js).
	JSONForm JSONFormVM
	// MayFix: editing the input, skipping the step and closing the item are offered (admins;
	// accountants unless the organization keeps them to admins).
	MayFix bool
	// Ask is the "ask an admin" form (accountants); nil hides it.
	Ask *AskVM
	// NeedsApproval: the workflow moves money: the accountant's edited input waits for an
	// admin's approval. Waiting: an input change of the item waits now.
	NeedsApproval, Waiting bool
	// PeriodClosed: the item's period is closed by the office (issue 23): a retry that would
	// post into it is refused; nil when it is open.
	PeriodClosed *PeriodClosedVM
	// PeriodReopened is the period of an item refused for a closed period that has been
	// reopened since: a retry posts now ("" otherwise).
	PeriodReopened string
	// Quarantine, for an item held back by a quarantined input value: "held" while it still
	// is (a retry comes back; correct the value or ask for its release), "released" once an
	// admin released it (a retry runs the step); "" for other items.
	Quarantine string
	// ClientValues: what the client's other executions hold in the field the reason names
	// (the right NIP of a NIP typed wrong is likely among them); nil hides it.
	ClientValues *ClientValuesVM
}

// ClientValuesVM is the field a refused input's reason names, the client, its page, and
// the values the client's other executions give the field, the most frequent first.
type ClientValuesVM struct {
	Field, Client, ClientURL string
	Values                   []ClientValue
}

// ClientValue is one of them, with how many executions hold it ("2 wykonania").
type ClientValue struct{ Value, Count string }

// listSep follows the i-th of n items of a list written inline: ", " but after the last.
func listSep(i, n int) string {
	if i < n-1 {
		return ", "
	}
	return ""
}

// PeriodClosedVM says which period closes an item, for whom, who closed it and when, and
// offers what to do instead.
type PeriodClosedVM struct {
	Period string
	// Client is the client's key; "" when closed for every client.
	Client, ClosedBy, Note string
	// ClosedAt and ClosedAtText are when (ISO, display).
	ClosedAt, ClosedAtText string
	// ReopenURL is the closed periods' page at its row (admins); "" for others, who ask.
	ReopenURL string
}

// RecoveryForm holds what was submitted when it is shown again with errors (422, 409) or a
// preview of the edited input.
type RecoveryForm struct {
	Action      string // which form was submitted
	Input       string
	Output      string
	Notes       string
	RetryPolicy string
	FromStepID  string
	Errors      map[string]string
	FormError   string
	Diff        []DiffLine // the edited input against the original, before it is submitted
	Previewed   bool
}

// DiffLine is one changed path of a JSON document: Op is "+", "-" or "~".
type DiffLine struct {
	Op     string
	Path   string
	Before string
	After  string
}

func diffClass(op string) string {
	switch op {
	case "+":
		return "added"
	case "-":
		return "removed"
	}
	return "changed"
}

// stepTone is the timeline class of a step status (as the execution page colours them).
func stepTone(status string) string {
	switch status {
	case "SUCCEEDED":
		return "step--ok"
	case "DLQ", "FAILED":
		return "step--danger"
	case "RETRYING", "RUNNING":
		return "step--warn"
	case "SKIPPED":
		return "step--partial"
	}
	return "step--muted"
}
