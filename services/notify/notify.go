// Package notify tells people that workflows failed: by email, in the app, on Slack and on
// Microsoft Teams (issue 11, seed 000 scenario 5).
//
// The contract:
//
//   - The engine calls [Service.Emit] with an [Event] inside the transaction that records
//     the failure. Emit decides from the workflow's settings.errorNotifications (keys it does
//     not set come from the organization's defaults, then seed 000's defaults) whether the
//     event is notified and to whom, and records the event and one delivery per channel ×
//     recipient in that transaction (the outbox). It does no network I/O. Its errors are the
//     database's; it never fails for a notification reason (bad settings are skipped).
//   - Deliveries are sent later by [Service.Dispatch], which a periodic River job runs every
//     second (services/jobs/notify.go): it claims due deliveries with a compare-and-set
//     (status pending → sending, a fresh claim token, a lease) so two dispatchers or a re-run
//     never send one delivery twice, sends each through its channel's [Sender], and records
//     the outcome under the same claim token. A sender that fails transiently is retried
//     with backoff (or after the 429's Retry-After) at a time kept in the database; a
//     permanent failure (a webhook's 400, 403 or 404, a refused address) stops at once. A
//     dispatcher that dies mid-send leaves the delivery "sending"; when its lease expires
//     another claims it and sends again with the same dedup key (the email's Message-ID,
//     the in-app row's delivery id), so at most one in-app row exists and a mail server can
//     drop the duplicate; a delivery recorded sent is never sent again except by [Service.Resend].
//   - Storms: beyond Settings.DigestThreshold deliveries a minute for one workflow, channel
//     and recipient, further ones are recorded "digested" and folded into one digest
//     delivery, due at the end of that minute.
//   - A notification never affects a workflow: Emit's only errors are the database's, and
//     sending happens outside the engine's transactions.
//   - Every query is scoped by organization; in-app notifications go only to members of the
//     event's organization.
//   - Time comes from Config.Now (injected in tests); nothing sleeps waiting to retry.
//
// The package imports no other service of Lifeline (services/engine and services/definition
// import it). Providers live in subpackages (email, slack, teams) and implement [Sender];
// in-app notifications are written by this package.
package notify

import (
	"encoding/json"
	"time"
)

// Kind is what happened.
type Kind string

// Kinds of events.
const (
	// FirstFailure: a step failed for the first time in an execution (notified only with
	// notifyOnFirstFailure).
	FirstFailure Kind = "first_failure"
	// RetryExhausted: a step used up its retries (notifyOnRetryExhausted).
	RetryExhausted Kind = "retry_exhausted"
	// DLQ: the execution went to the dead-letter queue (notifyOnDLQ; or, with
	// Event.RetriesExhausted, notifyOnRetryExhausted: one message either way).
	DLQ Kind = "dlq"
	// BreakerOpened: a circuit breaker opened (notifyOnBreakerOpen, off by default).
	BreakerOpened Kind = "breaker_opened"
	// Compensation: a notification compensation of a rollback; always sent to the
	// configured channels.
	Compensation Kind = "compensation"
	// Digest is the kind of the deliveries that fold a storm's messages; Emit never takes it.
	Digest Kind = "digest"
	// GroupOpened is the kind of the notification of a new or reopened failure group, and
	// GroupFollowUp of a group's hourly follow-up; Emit records them for a DLQ event with
	// a group when the settings notify per group.
	GroupOpened   Kind = "group_opened"
	GroupFollowUp Kind = "group_followup"
	// Test is the kind of a test message (Service.Test); never recorded.
	Test Kind = "test"
	// ChangeApproved and ChangeRejected tell an accountant that an admin approved or
	// rejected her input-change request (Event.To, Event.DeadLetterID, Event.DecidedBy,
	// Event.Notes); Emit records them for her alone (see emitDecision).
	ChangeApproved Kind = "change_approved"
	ChangeRejected Kind = "change_rejected"
)

// GroupInfo is what a DLQ event says of the failure group its dead letter joined.
type GroupInfo struct {
	ID string
	// Title is the group's title (the reason with its variable parts as placeholders).
	Title string
	// Count is how many items ever joined the group, this one included; 0 when the engine
	// did not read it (on PostgreSQL, a failure that joined an open group: the notifier
	// reads the group's arrivals when it needs them).
	Count int
	// New: the group was made for this item; Reopened: it was resolved and this item
	// reopened it; Muted: it is muted (its items notify nothing until the mute ends).
	New, Reopened, Muted bool
}

// Kinds lists the kinds Emit takes.
var Kinds = []Kind{FirstFailure, RetryExhausted, DLQ, BreakerOpened, Compensation}

// Event is one thing to tell people about. Texts must already be masked (no secret values)
// and carry no stack trace.
type Event struct {
	Kind           Kind
	OrganizationID string
	WorkflowID     string
	WorkflowName   string
	ExecutionID    string
	// Subject is the execution's subject (settings.subject rendered), may be "".
	Subject   string
	StepID    string
	StepName  string
	ErrorType string
	ErrorCode string
	// Reason is the error's reason, already masked.
	Reason string
	// RetriesExhausted, with Kind DLQ: the failure also exhausted the step's retries.
	RetriesExhausted bool
	// BreakerID names the breaker that opened (BreakerOpened).
	BreakerID string
	// Message is the text a notification compensation sends (Compensation).
	Message string
	// Settings is the definition's settings.errorNotifications; nil: the organization's
	// defaults.
	Settings json.RawMessage `json:"-"`
	// At is when it happened (default: the service's clock).
	At time.Time
	// Group, on a DLQ event, is the failure group the dead letter joined (nil: none).
	Group *GroupInfo `json:",omitempty"`
	// DeadLetterID is the item a decision on an input change is about (its page is the
	// link); To is the user told of the decision (who asked), DecidedBy the admin who
	// decided (as people read it) and Notes the admin's note.
	DeadLetterID string `json:",omitempty"`
	To           string `json:",omitempty"`
	DecidedBy    string `json:",omitempty"`
	Notes        string `json:",omitempty"`
	// DedupKey, when set, makes Emit idempotent: a second Emit with the same key records
	// nothing (e.g. the attempt id). Default: kind, execution, step, breaker and At.
	DedupKey string `json:"-"`
}
