// Package pages holds one templ component per screen and the view models
// they render. Handlers build the view models (display-ready strings and
// URLs, never GORM types) and pick either a full page or, for htmx requests,
// the page's fragment component.
//
// Fragments and their root element ids:
//
//	WorkflowCreateFormFragment  form#workflow-form   (422 → re-rendered with errors)
//	StartFormFragment           form#start-form      (422 → re-rendered with errors)
//	ExecutionTableFragment      div#executions-table (filters, "Load more"; 422 → the filter's errors)
//	ExecutionBody               div#execution-body   (polls itself every 2s while Live)
//	DLQTableFragment            div#dlq-table        (filters, "Load more"; 422 → the filter's errors)
//
// Times are passed twice: an RFC 3339 value (…At) for <time datetime> and a
// UTC text (…AtText) shown until app.js converts it to local time.
package pages

import "lifeline/views/components"

// Option is one <option> of a filter <select>.
type Option struct {
	Value    string
	Label    string
	Selected bool
}

// LoginVM feeds Login.
type LoginVM struct {
	Email  string // re-filled after a failed attempt
	Error  string // shown above the form (role=alert)
	Next   string // where to go after login (hidden field "next")
	Action string // POST target
}

// WorkflowsVM feeds Workflows.
type WorkflowsVM struct {
	Rows       []WorkflowRow
	CanCreate  bool // shows the "New workflow" form
	CreateForm WorkflowCreateForm
}

// WorkflowRow is one workflow in the list.
type WorkflowRow struct {
	ID            string
	Name          string
	Description   string
	URL           string
	Version       int
	Steps         int
	LastStatus    string // empty = never run
	LastRunAt     string
	LastRunAtText string
	Executions    int
}

// WorkflowCreateForm is the JSON definition form. Errors are keyed by field
// path ("name", "steps[1].config.url"); FormError is a message for the form
// as a whole (e.g. "The definition is not valid JSON").
type WorkflowCreateForm struct {
	Action     string
	Definition string
	Errors     map[string]string
	FormError  string
}

// WorkflowVM feeds Workflow (one workflow's detail page).
type WorkflowVM struct {
	ID             string
	Name           string
	Description    string
	Version        string
	CreatedAt      string
	CreatedAtText  string
	Steps          []StepDefRow
	UnknownErrors  string // how unclassified errors are treated, e.g. "retried as transient"
	PolicyJSON     string // effective workflow policy
	DefinitionJSON string
	Start          StartForm
	Recent         []ExecutionRow
	ExecutionsURL  string
	WebhookURL     string // empty = no webhook trigger
	BreakersURL    string // the breakers page filtered by this workflow
	Money          WorkflowMoneyVM
}

// WorkflowMoneyVM is the workflow's "moves money" setting: shown to everyone, a form for
// admins (Action set).
type WorkflowMoneyVM struct {
	MovesMoney bool
	Action     string // "" when the reader may not change it
	Error      string // the form's message (422)
	Saved      bool
}

// StepDefRow is one step of a workflow definition.
type StepDefRow struct {
	Index        int
	ID           string
	Name         string
	Type         string
	Summary      string // e.g. "POST https://…"
	Timeout      string
	Policy       string // one line, e.g. "3 retries · 5s ×2 · max 5m"
	PolicySource string // "step" | "workflow" | "default"
	// BreakerState is the state of the step's circuit breaker (closed | open | half_open;
	// closed while it never failed); "" when the step has its breaker turned off.
	BreakerState string
	// OnFailure: where the step's failures go (by error type); Handler: an on-failure
	// handler step, with the steps it serves and where the execution goes on after it.
	OnFailure   []HandlerRoute
	Handler     bool
	Serves      string
	Next        string
	NextPartial bool
}

// HandlerRoute is one line of a step's on-failure rule: "validation → Return to preparer".
type HandlerRoute struct {
	Errors  string // the error types, or "any error" / "other errors"
	Handler string
}

// StartForm starts an execution with a JSON input. Errors["input"] is shown
// under the textarea; other keys are listed too.
type StartForm struct {
	Action    string
	Input     string // defaults to "{}" when empty
	Errors    map[string]string
	FormError string
	CanStart  bool // false (viewers): the form is replaced by a note
}

// ExecutionsVM feeds Executions.
type ExecutionsVM struct {
	Filter ExecutionFilter
	Table  ExecutionTable
}

// ExecutionFilter is the GET filter form above the executions table. Its field names are
// the query keys of the page and the API: workflowId, status, q.
type ExecutionFilter struct {
	Action     string
	Status     string
	WorkflowID string
	Q          string // text the subject contains
	Sort       string // the list's order (a hidden field: changing a filter keeps it)
	Active     int    // how many filters are in use ("Filters (2)" on a phone)
	Statuses   []Option
	Workflows  []Option
	Errors     map[string]string // by query key, for a 422
}

// ExecutionTable is the swappable list of executions.
type ExecutionTable struct {
	Rows     []ExecutionRow
	NextURL  string // next page ("Load more"); empty on the last page
	Filtered bool   // picks the empty-state wording
	// Sort is each sortable column's header link, by column: subject, started.
	Sort map[string]SortLink
	// Error and FieldErrors say why the filter was refused (422): the table shows them in
	// place of rows, so an htmx swap of the table alone shows them too.
	Error       string
	FieldErrors map[string]string
}

// ExecutionRow is one execution in a list.
type ExecutionRow struct {
	ID            string
	ShortID       string
	Subject       string // the row's title; "" shows ShortID
	URL           string
	WorkflowName  string
	WorkflowURL   string
	Status        string
	Trigger       string
	CreatedAt     string
	CreatedAtText string
	Duration      string
	CurrentStep   string // the step's name
	CurrentStepID string
	ErrorType     string
	ErrorMessage  string
	Rollback      string // the rollback's status, if the execution was rolled back
	// About is what it is about (client, period, due date, amount).
	About components.AboutLine
}

// ExecutionVM feeds Execution and its self-refreshing ExecutionBody.
type ExecutionVM struct {
	// Waiting is the request a WAITING execution waits for (nil: none).
	Waiting *WaitingPanel
	// DeliveriesURL is the delivery log of this execution's notifications (admins).
	DeliveriesURL  string
	ID             string
	ShortID        string
	Status         string
	WorkflowName   string
	WorkflowURL    string
	Trigger        string
	CorrelationID  string
	CreatedAt      string
	CreatedAtText  string
	FinishedAt     string
	FinishedAtText string
	Duration       string
	InputJSON      string
	DLQURL         string // link to the dead letter, when there is one
	Subject        string // the title, when the workflow sets settings.subject
	RetryOfURL     string // a full retry: the execution it retries
	RetryOfID      string
	RetriedAsURL   string // the full retry of this execution, when there is one
	RetriedAsID    string
	// Recovery: the actions on the execution's pending dead letter (nil otherwise, or for viewers).
	Recovery *RecoveryVM
	// Rollback: its rollback, or the button that starts one (nil when neither applies).
	Rollback   *RollbackVM
	Live       bool // while true ExecutionBody polls RefreshURL every 2s
	RefreshURL string
	Steps      []StepVM
	Failure    *FailureVM // banner at the top when failed / in the DLQ
}

// FailureVM says where and why an execution failed.
type FailureVM struct {
	StepID    string
	StepName  string
	ErrorType string
	ErrorCode string
	Message   string
	// HandlerID/HandlerName: the handler step the failure was handed to (not an alert then).
	HandlerID   string
	HandlerName string
	// Recovered: the execution was retried since and is running or succeeded (not an alert).
	Recovered bool
}

// StepVM is one step of an execution's timeline.
type StepVM struct {
	Index           int
	ID              string
	Name            string
	Type            string
	Status          string
	Attempts        []AttemptVM
	NextRetryAt     string
	NextRetryAtText string
	// Handler: an on-failure handler step; Handles names the step whose failure it took
	// over, WentOn the step the execution went on at after it (else EndedPartial).
	Handler      bool
	Handles      StepLink
	WentOn       StepLink
	EndedPartial bool
	// HandedTo: this step failed for good and its failure went to this handler.
	HandedTo StepLink
	// FellBack says that the step's breaker was open and its fallback ran instead ("Usługa
	// … niedostępna (bezpiecznik otwarty) — uruchomiono krok zastępczy „…”"), FallbackTo
	// links that fallback; StandsIn (on a fallback) links the step it ran instead of.
	FellBack   string
	FallbackTo StepLink
	StandsIn   StepLink
}

// StepLink names a step of the same page (its anchor is domID("step", ID)).
type StepLink struct {
	ID   string
	Name string
}

// AttemptVM is one try of a step.
type AttemptVM struct {
	Number         int
	Label          string // "Attempt 2 of 5" (of its run's last), or "Attempt 2"
	Status         string
	StartedAt      string
	StartedAtText  string
	FinishedAt     string
	FinishedAtText string
	Duration       string
	ErrorType      string
	ErrorCode      string
	ErrorMessage   string
	StackTrace     string
	InputJSON      string
	OutputJSON     string
	IdempotencyKey string
	// BreakerWait replaces the error of an attempt waiting on an open circuit breaker
	// ("Waiting on the circuit breaker until …"); BreakersURL links to the breakers page.
	// FellBack replaces the error of an attempt its open breaker refused and whose step's
	// fallback ran instead (the step's FellBack).
	BreakerWait string
	FellBack    string
	BreakersURL string
}

// DLQVM feeds DLQ (the dead-letter list).
type DLQVM struct {
	// Deadlines is the banner of obligations at risk (issue 23).
	Deadlines []DeadlineAlert
	Filter    DLQFilter
	Counts    []StatusCount // one per status, in DLQ status order
	Rows      []DLQRow
	NextURL   string
	Filtered  bool // picks the empty-state wording
	// Error and FieldErrors say why the filter was refused (422), in place of rows.
	Error       string
	FieldErrors map[string]string
	// Bulk is the bulk-action form (admins); nil hides it and the rows' checkboxes.
	Bulk *BulkBar
	// ProblemsURL is the Problems page (the same items grouped by cause; "" without it).
	ProblemsURL string
	// Sort is each sortable column's header link, by column: subject, retries, age, expires.
	Sort map[string]SortLink
	// SplitCSRF, on a group's page for those who may split, adds a column whose rows with a
	// SplitURL offer "split out" (with a confirmation).
	SplitCSRF string
}

// SortLink is a sortable column's header: the list in the column's next order (filters
// kept) and the column's aria-sort ("ascending", "descending", or "" when the list is not
// in its order).
type SortLink struct {
	URL  string
	Aria string
}

// StatusCount is one status's count above the dead-letter list: a link that filters by it.
type StatusCount struct {
	Status string
	Label  string
	Count  string // display: "12", "10 000+"
	URL    string
	Active bool // the list is filtered by this status
}

// DLQFilter is the GET filter form above the dead-letter table. Its field names are the
// query keys of the page and the API: workflowId, status, errorType, stepId, from, to, q.
type DLQFilter struct {
	Action     string
	WorkflowID string
	Status     string
	ErrorType  string
	StepID     string
	From, To   string // dates (YYYY-MM-DD) in the user's time zone
	Q          string // text the subject or the reason contains
	Sort       string // the list's order (a hidden field: changing a filter keeps it)
	Active     int    // how many filters are in use ("Filters (2)" on a phone)
	Workflows  []Option
	Statuses   []Option
	ErrorTypes []Option
	Steps      []Option
	Errors     map[string]string // by query key, for a 422
}

// DLQRow is one dead letter in a list (and the head of DLQItemVM).
type DLQRow struct {
	ID            string
	URL           string
	ExecutionURL  string
	WorkflowName  string
	WorkflowURL   string
	FailedStep    string // the step's name from the definition, else its id
	ErrorType     string
	ErrorMessage  string
	Status        string // pending | processing | resolved | skipped | expired
	CreatedAt     string
	CreatedAtText string
	ExpiresAt     string
	ExpiresAtText string
	// The list's own columns.
	Title        string // the execution's subject, else ShortID
	HasSubject   bool   // Title is a subject (not the short id)
	ShortID      string // the execution's
	FailedStepID string
	Reason       string // what a person can act on
	RetryCount   int    // automatic retries made before it was dead-lettered
	Age          string // "3 days ago" (CreatedAtText in the tooltip)
	ExpiresIn    string // "in 27 days" (ExpiresAtText in the tooltip); "" once handled
	Expiring     bool   // still open and expires within 3 days: flagged
	// About is what its execution is about (client, period, due date, amount).
	About components.AboutLine
	// SplitURL, on a group's page, splits the item out of the group ("" when it may not).
	SplitURL string
}

// ErrorVM feeds Error.
type ErrorVM struct {
	Status  int
	Title   string
	Message string // user-safe message
	// Fields are messages by field (a 422's: the query key or form field refused).
	Fields  map[string]string
	BackURL string // empty = "/"
}
