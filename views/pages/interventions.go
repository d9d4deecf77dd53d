package pages

import "lifeline/views/components"

// WaitingVM is "Czeka na Ciebie" / "Waiting for you": the open requests of ask steps the
// user may answer (a viewer reads every open one).
type WaitingVM struct {
	Items []InterventionCard
	// Others are, for an admin, the open requests assigned to others, which an admin may
	// answer too.
	Others []InterventionCard
	// Done is the flash after an answer ("" for none).
	Done string
	// ReadOnly: a viewer, who reads requests and answers none.
	ReadOnly bool
	// RefreshURL is this page, which the live refresh asks for again (a request an answer
	// led to appears without a reload).
	RefreshURL string
}

// InterventionCard is one request, display-ready.
type InterventionCard struct {
	ID, URL            string
	Title, Message     string
	Kind, KindText     string
	StepName           string
	Status, StatusText string
	WorkflowName       string
	WorkflowURL        string
	ExecutionURL       string
	Subject            string
	About              components.AboutLine
	Holders            string // who has it now, in words
	Escalated          string // "escalated, level 2" ("" before any escalation)
	ExpiresAt          string // RFC 3339
	ExpiresText, Left  string // "25 lis 2026, 14:00", "za 2 dni" (Left "" once it is closed)
	Urgent             bool   // under a day left
	Outcome            string // who answered what and when, a timeout, a cancel ("" while open)
	// Outputs are the earlier steps' results (the list shows them; the request's page has
	// its own section).
	Outputs []StepOutput
}

// InterventionVM is a request's page: its context, the earlier steps' outputs, and its form
// when the user may answer it now.
type InterventionVM struct {
	Card    InterventionCard
	BackURL string
	Outputs []StepOutput
	// FailedError (error resolution): the failed step's error.
	FailedError string
	// Form is nil when there is nothing to answer (closed, a viewer, barred).
	Form *AnswerForm
	// CannotAnswer says why there is no form while the request is open.
	CannotAnswer string
	// Conflict (409): someone answered first; who and when.
	Conflict string
	// LinkNote says an e-mail link cannot be used (used, expired, someone else's).
	LinkNote string
}

// StepOutput is an earlier step's output: its scalar values.
type StepOutput struct {
	Step   string
	Fields []KeyValue
}

// KeyValue is one value of an output.
type KeyValue struct{ Key, Value string }

// AnswerForm is the form of a request, per kind: approval (approve / reject with a note),
// input (Fields), decision (Options), error resolution (Fields, continue / abort).
type AnswerForm struct {
	Action, CSRF, Kind string
	// LinkToken is the e-mail link's token, posted with the answer (which consumes it).
	LinkToken string
	FormError string
	Note      string
	NoteError string
	Fields    []AskField
	Options   []AskOption
	// RejectConfirm is the question a rejection asks first.
	RejectConfirm string
}

// AskField is one field of an input form. Type is an <input> type, "select" or "checkbox".
type AskField struct {
	Name, ID, Label, Type string
	Value                 string
	Checked               bool
	Required              bool
	Min, Max, Step        string
	Pattern, InputMode    string
	Hint                  string
	Options               []Option
	Error                 string
}

// AskOption is one button of a decision or an error resolution.
type AskOption struct {
	ID, Label   string
	Destructive bool
	Default     bool
	// Confirm is the question a destructive option asks first.
	Confirm string
}

// WaitingPanel is what a waiting execution's page says of its request.
type WaitingPanel struct {
	Title, Message, KindText string
	Holders                  string
	ExpiresAt, ExpiresText   string
	Left                     string
	URL                      string
	// CancelURL (admins): cancel the execution, with a note, after a confirmation.
	CancelURL, CSRF string
}
