package models

import "time"

// An execution or an attempt waiting for a person's answer to an `ask` step (issue 25).
const (
	// ExecWaiting: the execution waits at an ask step; it holds no worker and no connection.
	ExecWaiting = "WAITING"
	// StepWaiting: an ask step's attempt whose request is open. No job exists for it: an
	// answer, a timeout or a cancel moves it on.
	StepWaiting = "WAITING"
)

// Kinds of request an ask step makes (seed 003 §8).
const (
	AskApproval        = "approval"         // approve / reject, with a note
	AskInput           = "input"            // a form described by a small schema
	AskDecision        = "decision"         // one of named options
	AskErrorResolution = "error_resolution" // fix and continue, or abort
)

// AskKinds lists them.
var AskKinds = []string{AskApproval, AskInput, AskDecision, AskErrorResolution}

// Intervention statuses. Open is the only one that changes: to answered (the first valid
// answer), timed_out (the sweep, at ExpiresAt) or cancelled (the execution was cancelled).
const (
	InterventionOpen      = "open"
	InterventionAnswered  = "answered"
	InterventionTimedOut  = "timed_out"
	InterventionCancelled = "cancelled"
)

// InterventionStatuses lists them.
var InterventionStatuses = []string{InterventionOpen, InterventionAnswered, InterventionTimedOut, InterventionCancelled}

// Intervention is a request an ask step's attempt made of a person (a row of interventions):
// one per attempt, created in the commit that parks the attempt WAITING.
type Intervention struct {
	ID             string
	OrganizationID string
	ExecutionID    string
	// AttemptID is the ask step's attempt (unique): a retry of the step is a new attempt and
	// a new request.
	AttemptID string
	StepID    string
	// StepName is the step's title (its name, or its id) when the request was made.
	StepName string
	Kind     string
	// Title and Message are the step's templates rendered over the input and earlier outputs.
	Title   string
	Message string
	// Schema (input): the form, as configured: {"fields": [{"name", "label", "type":
	// string|number|amount|date|enum|boolean, "required", "min", "max", "pattern",
	// "options": [...]}]}.
	Schema JSON
	// Options (decision, error_resolution): [{"id", "label", "destructive"}].
	Options       JSON
	DefaultOption *string
	// Assignees are who may answer, as configured: "role:<role>", an email, or a user id.
	Assignees StringList
	// Holders are who has it now: the assignees, or the escalation level it reached.
	Holders StringList
	// Escalation is the step's escalation as configured ({"levels": [{"afterMs", "to"}],
	// "repeat"}); EscalationLevel is the level reached (0: none yet) in round EscalationRound.
	Escalation      JSON
	EscalationLevel int
	EscalationRound int
	// FourEyes: Barred (who started the execution or edited its input) may not answer.
	FourEyes bool
	Barred   StringList
	Status   string
	// ExpiresAt is when it times out: every request has one (timeoutMs or timeoutBeforeDue).
	ExpiresAt time.Time
	// NextEscalationAt and RemindAt are the sweep's next times for this request (nil: none).
	NextEscalationAt *time.Time
	RemindAt         *time.Time
	// Answer is the step's output once answered, or what its timeout decided.
	Answer         JSON
	AnsweredBy     *string // the user's id; nil for a timeout
	AnsweredByName *string // their email, as people read it
	AnsweredAt     *time.Time
	// IdempotencyKey is the answer's (an API client's Idempotency-Key): the same key again
	// gets the same answer back instead of 409.
	IdempotencyKey *string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// TableName is interventions.
func (Intervention) TableName() string { return "interventions" }

// InterventionFilter selects requests for a list.
type InterventionFilter struct {
	// Status: one of InterventionStatuses, or "" for any.
	Status string
	// Mine: only those the user (UserID, of Role in the organization) may answer now.
	Mine bool
	// Assigned, with Mine: only those whose holders name the user (their id, e-mail or
	// role; an owner's role includes admin's), even for an admin or owner, who may answer
	// any.
	Assigned bool
	UserID   string
	Role     string
	// ExecutionID: only the requests of one execution.
	ExecutionID string
	Limit       int
}
