package models

import (
	"slices"
	"time"
)

// Roles, from most to least powerful.
const (
	RoleOwner      = "owner"
	RoleAdmin      = "admin"
	RoleAccountant = "accountant"
	RoleViewer     = "viewer"
)

// Roles lists the roles from most to least powerful.
var Roles = []string{RoleOwner, RoleAdmin, RoleAccountant, RoleViewer}

// RoleAtLeast reports whether role is at least as powerful as min.
func RoleAtLeast(role, min string) bool {
	rank := func(r string) int {
		for i, x := range Roles {
			if x == r {
				return len(Roles) - i
			}
		}
		return 0
	}
	return rank(role) > 0 && rank(role) >= rank(min)
}

// Execution statuses (seed 002 run model).
const (
	ExecPending    = "PENDING"
	ExecRunning    = "RUNNING"
	ExecSucceeded  = "SUCCEEDED"
	ExecFailed     = "FAILED"
	ExecPartial    = "PARTIAL"
	ExecDLQPending = "DLQ_PENDING"
)

// ExecutionStatuses lists every execution status.
var ExecutionStatuses = []string{ExecPending, ExecRunning, ExecWaiting, ExecSucceeded, ExecFailed, ExecPartial, ExecDLQPending}

// ExecutionFilterStatuses are the statuses the executions list filters by: an execution's,
// or its rollback's (rollback_status beside a failed execution's status).
var ExecutionFilterStatuses = append(slices.Clone(ExecutionStatuses), RollbackStatuses...)

// Step attempt statuses (seed 002 step model).
const (
	StepPending   = "PENDING"
	StepRunning   = "RUNNING"
	StepSucceeded = "SUCCEEDED"
	StepRetrying  = "RETRYING"
	StepFailed    = "FAILED"
	StepDLQ       = "DLQ"
	StepSkipped   = "SKIPPED"
	// StepNotRun is shown, never stored: a step of a finished execution that never ran.
	StepNotRun = "NOT_RUN"
)

// Error record statuses (seed 000).
const (
	ErrPending    = "pending"
	ErrRetrying   = "retrying"
	ErrResolved   = "resolved"
	ErrEscalated  = "escalated"
	ErrDeadLetter = "dead_letter"
)

// Dead-letter statuses (seed 000).
const (
	DLQPending    = "pending"
	DLQProcessing = "processing"
	DLQResolved   = "resolved"
	DLQSkipped    = "skipped"
	DLQExpired    = "expired"
)

// DLQStatuses lists every dead-letter status.
var DLQStatuses = []string{DLQPending, DLQProcessing, DLQResolved, DLQSkipped, DLQExpired}

// Organization is a tenant: an accounting office.
type Organization struct {
	ID   string
	Name string
	// DefaultLanguage ("pl", "en") and TimeZone (an IANA name) apply to members who chose
	// none; nil: the browser's language, and UTC.
	DefaultLanguage *string
	TimeZone        *string
	CreatedAt       time.Time
}

func (Organization) TableName() string { return "organizations" }

// User is a person who logs in; their roles come from memberships.
type User struct {
	ID           string
	Email        string
	Name         string
	PasswordHash string
	// Language and TimeZone are the user's own choice; nil: the organization's.
	Language  *string
	TimeZone  *string
	CreatedAt time.Time
}

func (User) TableName() string { return "users" }

// Membership gives a user a role in an organization.
type Membership struct {
	ID             string
	OrganizationID string
	UserID         string
	Role           string
	CreatedAt      time.Time
}

func (Membership) TableName() string { return "memberships" }

// APIToken authenticates a system as `Authorization: Bearer`; only its SHA-256 is stored.
type APIToken struct {
	ID             string
	OrganizationID string
	Name           string
	Role           string
	TokenHash      string
	CreatedAt      time.Time
	LastUsedAt     *time.Time
	ExpiresAt      *time.Time // nil: never
	RevokedAt      *time.Time
}

func (APIToken) TableName() string { return "api_tokens" }

// Session is a server-side session (scs store).
type Session struct {
	Token  string `gorm:"primaryKey"`
	Data   []byte
	Expiry time.Time
}

func (Session) TableName() string { return "sessions" }

// Workflow is a named, versioned definition owned by an organization.
type Workflow struct {
	ID             string
	OrganizationID string
	Name           string
	Description    string
	Version        int
	Definition     JSON
	UnknownErrors  string
	WebhookToken   string
	WebhookSecret  string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

func (Workflow) TableName() string { return "workflows" }

// WorkflowVersion keeps every definition a workflow has had; executions run a fixed version.
type WorkflowVersion struct {
	ID             string
	OrganizationID string
	WorkflowID     string
	Version        int
	Definition     JSON
	CreatedAt      time.Time
}

func (WorkflowVersion) TableName() string { return "workflow_versions" }

// Execution is one run of a workflow version.
type Execution struct {
	ID              string
	OrganizationID  string
	WorkflowID      string
	WorkflowVersion int
	Status          string
	Input           JSON
	TriggerType     string
	CorrelationID   string
	CurrentStepID   *string
	CreatedBy       *string
	// Subject is the workflow's settings.subject rendered over the input at start; nil
	// when the workflow sets none.
	Subject *string
	// SearchText is what a search finds the execution by (SearchText: its subject and the
	// values of its input, folded; never a secret's value).
	SearchText string
	// RetryOf names the execution a full retry retries.
	RetryOf *string
	// What it is about: the workflow's settings rendered at start.
	About
	// While a manual replay runs: the dead letter it serves, when it began (retries are
	// counted from there) and the retry policy it overrides with (a retry.Spec).
	DeadLetterID  *string
	ReplayedAt    *time.Time
	RetryOverride JSON
	// OriginalInput is the input (sealed) before an operator first edited it.
	OriginalInput JSON
	// RollbackStatus: nil, or the state of its rollback (RollingBack, RolledBack, RollbackFailed).
	RollbackStatus *string
	StartedAt      *time.Time
	FinishedAt     *time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

func (Execution) TableName() string { return "workflow_executions" }

// StepAttempt is one attempt of one step of an execution (a row of step_executions).
type StepAttempt struct {
	ID             string
	OrganizationID string
	ExecutionID    string
	StepID         string
	StepIndex      int
	Attempt        int
	Status         string
	Generation     int
	// Reclaims counts how often the attempt was taken back from a process that died
	// while running it; at MaxReclaims it goes to the DLQ (LEASE_EXHAUSTED).
	Reclaims       int
	IdempotencyKey string
	Input          JSON
	Output         JSON
	ErrorType      *string
	ErrorCode      *string
	ErrorMessage   *string
	StackTrace     *string
	ScheduledAt    time.Time
	StartedAt      *time.Time
	FinishedAt     *time.Time
	LeaseExpiresAt *time.Time
	NextRetryAt    *time.Time
	// DurationUs is how long the step's request took, in microseconds, measured by the
	// engine around the step's run (nil: the step did not run, or it ran before this was
	// measured; started_at to finished_at is then the closest there is).
	DurationUs *int64
	// WaitingBreakerID names the open breaker the attempt waits on (PENDING).
	WaitingBreakerID *string
	// HandlesAttemptID (a handler step's attempt) names the failed attempt it handles.
	HandlesAttemptID *string
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

func (StepAttempt) TableName() string { return "step_executions" }

// IdempotencyKey remembers an API request's Idempotency-Key for at least 24 hours.
type IdempotencyKey struct {
	OrganizationID string `gorm:"primaryKey"`
	WorkflowID     string `gorm:"primaryKey"`
	IdemKey        string `gorm:"primaryKey"`
	RequestHash    string
	ExecutionID    string
	CreatedAt      time.Time
	ExpiresAt      time.Time
}

func (IdempotencyKey) TableName() string { return "api_idempotency_keys" }

// ExecutionError is the error record of one failing step of an execution (seed 000).
type ExecutionError struct {
	ID              string
	OrganizationID  string
	ExecutionID     string
	StepID          string
	ErrorType       string
	ErrorCode       *string
	ErrorMessage    string
	StackTrace      *string
	InputData       JSON
	OutputData      JSON
	StepState       JSON
	RetryCount      int
	MaxRetries      int
	NextRetryAt     *time.Time
	LastRetryAt     *time.Time
	Status          string
	ResolutionType  *string
	ResolutionNotes *string
	ResolvedBy      *string
	ResolvedAt      *time.Time
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

func (ExecutionError) TableName() string { return "workflow_execution_errors" }

// DeadLetter is an execution that exhausted its retries, with its whole context.
type DeadLetter struct {
	ID                string
	OrganizationID    string
	ErrorID           string
	WorkflowID        string
	ExecutionID       string
	OriginalInput     JSON
	StepStates        JSON
	FailedStepID      string
	Status            string
	ManualRetryCount  int
	LastManualRetryAt *time.Time
	ExpiresAt         time.Time
	// Copied from the execution and its error so the list needs no join: the subject, the
	// error type, the reason a person can act on, and the automatic retries made.
	Subject    *string
	ErrorType  string
	Reason     string
	RetryCount int
	// SearchText is what a search finds the item by: its execution's search text and the
	// reason, folded.
	SearchText string
	// Set when someone resolves or skips the item.
	ResolutionNotes *string
	ResolvedBy      *string
	ResolvedAt      *time.Time
	// ReplayExecutionID is the execution of the latest manual replay (the item's own, or a
	// full retry's new one).
	ReplayExecutionID *string
	// GroupID is the failure group the item belongs to (nil only for an item made before
	// groups, until the backfill gives it one).
	GroupID *string
	// About is its execution's, copied so the list sorts and sums without a join.
	About
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (DeadLetter) TableName() string { return "dead_letter_queue" }

// About is what an execution is about (issue 23), each nil when its workflow does not say or
// its input lacks it: the client's key, the period, the filing obligation and its due date (a
// civil date, YYYY-MM-DD: it sorts as text), and the amount in minor units of Currency.
type About struct {
	Client      *string
	Period      *string
	Obligation  *string
	DueOn       *string
	AmountMinor *int64
	Currency    *string
}

// AboutColumns are About's columns, as an update writes them.
func (a About) Columns() map[string]any {
	return map[string]any{"client": a.Client, "period": a.Period, "obligation": a.Obligation, "due_on": a.DueOn,
		"amount_minor": a.AmountMinor, "currency": a.Currency}
}

// CircuitBreaker is the shared state of one breaker: of a step of a workflow (ScopeKey
// "step:<workflow>:<step>") or of a target host ("host:<host>"), within an organization.
type CircuitBreaker struct {
	ID               string
	OrganizationID   string
	ScopeKey         string
	WorkflowID       *string
	StepID           *string
	Host             *string
	State            string
	FailureCount     int
	SuccessCount     int
	LastFailureAt    *time.Time
	LastSuccessAt    *time.Time
	FailureThreshold int
	ResetTimeoutMs   int
	HalfOpenRequests int
	// Forced: an admin opened it; it stays open until reset. Reason is the admin's.
	Forced       bool
	Reason       *string
	OpenedAt     *time.Time
	HalfOpenedAt *time.Time
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

func (CircuitBreaker) TableName() string { return "circuit_breaker_state" }

// BreakerFailure is one failure counted against a breaker (the window is counted from them).
type BreakerFailure struct {
	ID        string
	BreakerID string
	At        time.Time
}

func (BreakerFailure) TableName() string { return "circuit_breaker_failures" }

// BreakerTrial is a half-open trial slot of a breaker (Slot < its HalfOpenRequests), held by
// the attempt running the trial: AttemptID at Generation, until LeaseExpiresAt at the latest.
// It is free once that attempt is no longer PENDING or RUNNING at Generation, or its lease
// has passed.
type BreakerTrial struct {
	BreakerID      string `gorm:"primaryKey"`
	Slot           int    `gorm:"primaryKey;autoIncrement:false"`
	AttemptID      string
	Generation     int
	LeaseExpiresAt time.Time
	TakenAt        time.Time
}

func (BreakerTrial) TableName() string { return "circuit_breaker_trials" }

// Compensation statuses.
const (
	CompPending   = "pending"
	CompRunning   = "running"
	CompWaiting   = "waiting" // a manual compensation waits for an admin's confirmation
	CompCompleted = "completed"
	CompFailed    = "failed"
	CompSkipped   = "skipped"
)

// Rollback statuses of an execution (workflow_executions.rollback_status).
const (
	RollingBack    = "ROLLING_BACK"
	RolledBack     = "ROLLED_BACK"
	RollbackFailed = "ROLLBACK_FAILED"
)

// RollbackStatuses lists them.
var RollbackStatuses = []string{RollingBack, RolledBack, RollbackFailed}

// CompensationAction is one compensation of an execution's rollback: it undoes one completed
// step. Position orders the rollback (0 runs first: the last completed step). It runs durably
// like a step attempt (Generation, ScheduledAt, LeaseExpiresAt), with its own attempts and
// the idempotency key compensate:{execution}:{step}.
type CompensationAction struct {
	ID                 string
	OrganizationID     string
	WorkflowID         string
	StepID             string
	StepIndex          int
	Position           int
	CompensationType   string
	CompensationConfig JSON
	ExecutionID        *string
	Status             *string
	Attempts           int
	Generation         int
	IdempotencyKey     *string
	ErrorType          *string
	ErrorMessage       *string
	Result             JSON
	ScheduledAt        *time.Time
	StartedAt          *time.Time
	FinishedAt         *time.Time
	LeaseExpiresAt     *time.Time
	ExecutedAt         *time.Time
	ResolvedBy         *string
	CreatedAt          time.Time
	UpdatedAt          time.Time
}

func (CompensationAction) TableName() string { return "compensation_actions" }

// RetryPolicy is a stored policy: the organization default (WorkflowID nil), a workflow's
// (StepID nil) or a step's. Spec holds the fields as written; the other columns the
// effective values at that level.
type RetryPolicy struct {
	ID                string
	OrganizationID    string
	WorkflowID        *string
	StepID            *string
	MaxRetries        int
	InitialDelayMs    int
	MaxDelayMs        int
	BackoffMultiplier float64
	RetryOnErrors     StringList
	NoRetryOnErrors   StringList
	Spec              JSON
	CreatedAt         time.Time
}

func (RetryPolicy) TableName() string { return "retry_policies" }

// AuditEntry is one row of the audit log.
type AuditEntry struct {
	ID             string
	OrganizationID string
	ActorType      string
	ActorID        *string
	Action         string
	EntityType     string
	EntityID       string
	Details        JSON
	CreatedAt      time.Time
}

func (AuditEntry) TableName() string { return "audit_log" }

// Bulk job statuses.
const (
	BulkQueued    = "queued"
	BulkRunning   = "running"
	BulkDone      = "done"
	BulkCancelled = "cancelled"
)

// BulkJob is a bulk action on dead letters, run in the background.
type BulkJob struct {
	ID             string
	OrganizationID string
	Action         string
	Filter         JSON
	Notes          *string
	Status         string
	Total          int
	Processed      int
	Succeeded      int
	Failed         int
	CreatedBy      *string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	FinishedAt     *time.Time
	// IdemKey and RequestHash: the API request's Idempotency-Key and a hash of the request.
	IdemKey     *string
	RequestHash *string
	// PacedAt is when the job's last batch began (the next batch's size makes up for a late
	// start, so the job keeps its rate).
	PacedAt *time.Time
	// Edit is an edit_retry's change: {"field", "value"} (bulk.Edit).
	Edit JSON
}

func (BulkJob) TableName() string { return "dlq_bulk_jobs" }

// BulkItem is one dead letter of a bulk job and what the action did to it.
type BulkItem struct {
	BulkID       string `gorm:"primaryKey"`
	DeadLetterID string `gorm:"primaryKey"`
	Position     int
	Status       string // pending, waiting (on an open breaker), done, failed, skipped
	Message      *string
	ExecutionID  *string
	// BreakerKey is the scope key of the circuit breaker in front of the item's failed step
	// (retries only): the item waits while it is open.
	BreakerKey *string
	UpdatedAt  time.Time
}

func (BulkItem) TableName() string { return "dlq_bulk_items" }
