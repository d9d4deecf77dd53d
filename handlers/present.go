package handlers

import (
	"cmp"
	"encoding/json"
	"math"
	"strings"
	"time"

	"github.com/google/uuid"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/executions"
	"lifeline/services/money"
	"lifeline/views/i18n"
)

// checkID turns anything but a canonical id (a UUID in its 36-character lowercase form, as
// ids are stored) into "not found", the same answer on every database: uuid.Parse also
// accepts "urn:uuid:…", "{…}", 32 bare hex digits and upper case, which PostgreSQL reads as
// the same uuid or refuses with an error, and SQLite compares as different text.
func checkID(id, what string) error {
	if !isUUID(id) {
		return apperr.NotFound(what)
	}
	return nil
}

// isUUID reports whether id is a UUID in its canonical form (lower case, with hyphens).
func isUUID(id string) bool {
	if len(id) != 36 {
		return false
	}
	u, err := uuid.Parse(id)
	return err == nil && u.String() == id
}

func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func rfcPtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := rfc(*t)
	return &s
}

// apiCompensation is one compensation of a rollback.
type apiCompensation struct {
	ID               string          `json:"id"`
	StepID           string          `json:"stepId"`
	CompensationType string          `json:"compensationType"`
	Status           string          `json:"status"`
	Attempts         int             `json:"attempts"`
	StartedAt        *string         `json:"startedAt"`
	FinishedAt       *string         `json:"finishedAt"`
	Result           json.RawMessage `json:"result"`
	Error            *string         `json:"error"`
	ErrorType        *string         `json:"errorType,omitempty"`
}

func compensationsOf(cs []models.CompensationAction) []apiCompensation {
	out := make([]apiCompensation, 0, len(cs))
	for _, c := range cs {
		out = append(out, apiCompensation{ID: c.ID, StepID: c.StepID, CompensationType: c.CompensationType, Status: deref(c.Status),
			Attempts: c.Attempts, StartedAt: rfcPtr(c.StartedAt), FinishedAt: rfcPtr(c.FinishedAt), Result: json.RawMessage(c.Result),
			Error: c.ErrorMessage, ErrorType: c.ErrorType})
	}
	return out
}

// API shapes.

type apiAttemptError struct {
	Type    string `json:"type"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
	Trace   string `json:"trace,omitempty"`
}

type apiAttempt struct {
	Attempt        int     `json:"attempt"`
	Status         string  `json:"status"`
	IdempotencyKey string  `json:"idempotencyKey"`
	ScheduledAt    string  `json:"scheduledAt"`
	StartedAt      *string `json:"startedAt"`
	FinishedAt     *string `json:"finishedAt"`
	NextRetryAt    *string `json:"nextRetryAt,omitempty"`
	// DurationMs is how long the attempt's request took, in milliseconds (microsecond
	// precision), as the engine measured it; absent for one that did not run.
	DurationMs *float64         `json:"durationMs,omitempty"`
	Input      json.RawMessage  `json:"input,omitempty"`
	Output     json.RawMessage  `json:"output"`
	Error      *apiAttemptError `json:"error"`
}

type apiStep struct {
	ID       string       `json:"id"`
	Name     string       `json:"name"`
	Type     string       `json:"type"`
	Status   string       `json:"status"`
	Attempts []apiAttempt `json:"attempts"`
	// Handler: an on-failure handler step. HandlerFor: the step whose failure it took over
	// in this execution; Serves: every step that may hand it a failure; Next: where the
	// execution goes on after it ("" ends it PARTIAL).
	Handler    bool     `json:"handler,omitempty"`
	HandlerFor string   `json:"handlerFor,omitempty"`
	Serves     []string `json:"serves,omitempty"`
	Next       string   `json:"next,omitempty"`
	// HandledBy: this step failed for good and that handler step took its failure over.
	HandledBy string `json:"handledBy,omitempty"`
	// FallbackStepID: the step's fallback (definition). FellBackTo: its breaker was open and
	// that fallback ran instead in this execution; StandsInFor: this fallback ran instead of
	// that step.
	FallbackStepID string `json:"fallbackStepId,omitempty"`
	FellBackTo     string `json:"fellBackTo,omitempty"`
	StandsInFor    string `json:"standsInFor,omitempty"`
}

type apiExecution struct {
	ID              string          `json:"id"`
	WorkflowID      string          `json:"workflowId"`
	WorkflowName    string          `json:"workflowName,omitempty"`
	WorkflowVersion int             `json:"workflowVersion"`
	Subject         *string         `json:"subject"`
	Status          string          `json:"status"`
	Trigger         string          `json:"trigger"`
	CorrelationID   string          `json:"correlationId"`
	CurrentStepID   *string         `json:"currentStepId"`
	Input           json.RawMessage `json:"input,omitempty"`
	CreatedAt       string          `json:"createdAt"`
	StartedAt       *string         `json:"startedAt"`
	FinishedAt      *string         `json:"finishedAt"`
	DLQID           string          `json:"dlqId,omitempty"`
	// InterventionID is a WAITING execution's open request (issue 25).
	InterventionID string            `json:"interventionId,omitempty"`
	RetryOf        *string           `json:"retryOf,omitempty"` // a full retry: the execution it retries
	RollbackStatus *string           `json:"rollbackStatus,omitempty"`
	Compensations  []apiCompensation `json:"compensations,omitempty"`
	Steps          []apiStep         `json:"steps,omitempty"`
	apiAbout
}

// apiAbout is what an execution is about (issue 23): null where its workflow does not say
// or its input lacks it. The amount is a decimal string in Currency ("184230.50"), never a
// JSON number a client could read into a float; dueAt is a date ("2026-11-25").
type apiAbout struct {
	Client     *string `json:"client"`
	Period     *string `json:"period"`
	Obligation *string `json:"obligation"`
	DueAt      *string `json:"dueAt"`
	Amount     *string `json:"amount"`
	Currency   *string `json:"currency"`
}

func apiAboutOf(ab models.About) apiAbout {
	a := apiAbout{Client: ab.Client, Period: ab.Period, Obligation: ab.Obligation, DueAt: ab.DueOn, Currency: ab.Currency}
	if ab.AmountMinor != nil && ab.Currency != nil {
		v := money.Decimal(*ab.AmountMinor, *ab.Currency)
		a.Amount = &v
	}
	return a
}

func apiExecutionSummary(ex *models.Execution, wfName string) apiExecution {
	return apiExecution{ID: ex.ID, WorkflowID: ex.WorkflowID, WorkflowName: wfName, WorkflowVersion: ex.WorkflowVersion, Subject: ex.Subject,
		Status: ex.Status, Trigger: ex.TriggerType, CorrelationID: ex.CorrelationID, CurrentStepID: ex.CurrentStepID,
		CreatedAt: rfc(ex.CreatedAt), StartedAt: rfcPtr(ex.StartedAt), FinishedAt: rfcPtr(ex.FinishedAt), RetryOf: ex.RetryOf, RollbackStatus: ex.RollbackStatus,
		apiAbout: apiAboutOf(ex.About)}
}

func apiExecutionDetail(d *executions.Detail) apiExecution {
	out := apiExecutionSummary(d.Ex, d.WorkflowName)
	out.Input = json.RawMessage(d.Ex.Input)
	if d.DLQ != nil {
		out.DLQID = d.DLQ.ID
	}
	if d.Ex.RollbackStatus != nil {
		out.Compensations = compensationsOf(d.Compensations)
	}
	out.Steps = []apiStep{}
	handled, handedTo := d.Handoffs()
	stoodFor, fellBackTo := d.Fallbacks()
	for _, sd := range d.Steps {
		st := apiStep{ID: sd.Step.ID, Name: sd.Step.Title(), Type: sd.Step.Type, Status: sd.Status(d.Ex), Attempts: []apiAttempt{},
			Handler: sd.Step.Handler, HandledBy: handedTo[sd.Step.ID], HandlerFor: handled[sd.Step.ID],
			FallbackStepID: sd.Step.FallbackStepID, FellBackTo: fellBackTo[sd.Step.ID], StandsInFor: stoodFor[sd.Step.ID]}
		if sd.Step.Handler {
			st.Serves, st.Next = d.Def.Served(sd.Index), sd.Step.Next
		}
		for _, a := range sd.Attempts {
			aa := apiAttempt{Attempt: a.Attempt, Status: a.Status, IdempotencyKey: a.IdempotencyKey, ScheduledAt: rfc(a.ScheduledAt),
				StartedAt: rfcPtr(a.StartedAt), FinishedAt: rfcPtr(a.FinishedAt), NextRetryAt: rfcPtr(a.NextRetryAt),
				Input: json.RawMessage(a.Input), Output: json.RawMessage(a.Output)}
			if a.DurationUs != nil {
				ms := float64(*a.DurationUs) / 1000
				aa.DurationMs = &ms
			}
			if a.ErrorType != nil {
				aa.Error = &apiAttemptError{Type: *a.ErrorType, Code: deref(a.ErrorCode), Message: deref(a.ErrorMessage), Trace: deref(a.StackTrace)}
			}
			st.Attempts = append(st.Attempts, aa)
		}
		out.Steps = append(out.Steps, st)
	}
	return out
}

// apiDLQItem is a dead letter in the API: the list's fields, and with full (the item
// endpoint) its original input, step states and the error's code and trace.
type apiDLQItem struct {
	ID           string  `json:"id"`
	ExecutionID  string  `json:"executionId"`
	WorkflowID   string  `json:"workflowId"`
	WorkflowName string  `json:"workflowName"`
	Subject      *string `json:"subject"`
	FailedStepID string  `json:"failedStepId"`
	// GroupID is the item's failure group (null only before the backfill reached it).
	GroupID          *string         `json:"groupId"`
	Status           string          `json:"status"`
	ErrorType        string          `json:"errorType"`
	Reason           string          `json:"reason"`
	RetryCount       int             `json:"retryCount"`
	Error            apiAttemptError `json:"error"`
	ManualRetryCount int             `json:"manualRetryCount"`
	CreatedAt        string          `json:"createdAt"`
	ExpiresAt        string          `json:"expiresAt"`
	ResolvedAt       *string         `json:"resolvedAt,omitempty"`
	ResolvedBy       *string         `json:"resolvedBy,omitempty"` // the user who closed it (not set for a token or the engine)
	ResolutionNotes  *string         `json:"resolutionNotes,omitempty"`
	OriginalInput    json.RawMessage `json:"originalInput,omitempty"`
	StepStates       json.RawMessage `json:"stepStates,omitempty"`
	// History (the item endpoint): what happened to it, oldest first.
	History []apiHistoryEntry `json:"history,omitempty"`
	apiAbout
}

// apiDLQ is a dead letter for the API. Without full (the list, which reads no error record)
// the error is its type and the reason; with full (GetDLQ's row) the error record's code,
// message and trace, the original input and the step states.
func apiDLQ(r *models.DLQRow, full bool) apiDLQItem {
	out := apiDLQItem{ID: r.ID, ExecutionID: r.ExecutionID, WorkflowID: r.WorkflowID, WorkflowName: r.WorkflowName,
		Subject: r.Subject, FailedStepID: r.FailedStepID, GroupID: r.GroupID, Status: r.Status, ErrorType: r.ErrorType, Reason: r.Reason,
		RetryCount: r.RetryCount, ManualRetryCount: r.ManualRetryCount, Error: apiAttemptError{Type: r.ErrorType, Message: r.Reason},
		CreatedAt: rfc(r.CreatedAt), ExpiresAt: rfc(r.ExpiresAt), ResolvedAt: rfcPtr(r.ResolvedAt),
		ResolvedBy: r.ResolvedBy, ResolutionNotes: r.ResolutionNotes, apiAbout: apiAboutOf(r.About)}
	if full {
		out.Error.Code, out.Error.Message, out.Error.Trace = deref(r.ErrorCode), cmp.Or(r.ErrorMessage, r.Reason), deref(r.StackTrace)
		out.OriginalInput = json.RawMessage(r.OriginalInput)
		out.StepStates = json.RawMessage(r.StepStates)
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Display helpers for pages.

// relativeTime says how far t is from now, then when: "za 29 dni · 22 gru 2026, 10:23".
func relativeTime(l *i18n.Localizer, t time.Time) string {
	return l.Relative(t, time.Now()) + " · " + l.Time(t)
}

// displayTime shows t in the user's language and time zone.
func displayTime(l *i18n.Localizer, t time.Time) string { return l.Time(t) }

// secondsPtr is displayTimePtr to the second.
func secondsPtr(l *i18n.Localizer, t *time.Time) (iso, text string) {
	if t == nil {
		return "", ""
	}
	return rfc(*t), l.TimeSec(*t)
}

func displayTimePtr(l *i18n.Localizer, t *time.Time) (iso, text string) {
	if t == nil {
		return "", ""
	}
	return rfc(*t), displayTime(l, *t)
}

// displayDuration shows d in l's units and number format: "42 µs", "0,4 ms", "2,3 ms",
// "250 ms", "1,5 s", "6 min 12 s", "2 h 5 min" / "42 µs", "0.4 ms", "2.3 ms", "250 ms",
// "1.5 s", "6m 12s", "2h 5m"; "" for a negative d. Work that took time never reads "0 ms".
func displayDuration(l *i18n.Localizer, d time.Duration) string {
	switch {
	case d < 0:
		return ""
	case d > 0 && d < 100*time.Microsecond:
		return l.T("duration.us", "N", d.Microseconds())
	case d > 0 && d < 10*time.Millisecond:
		return l.T("duration.ms", "N", decimal(l, math.Floor(float64(d.Microseconds())/100)/10, 1))
	case d < time.Second:
		return l.T("duration.ms", "N", d.Milliseconds())
	case d < time.Minute:
		return l.T("duration.s", "N", decimal(l, math.Floor(d.Seconds()*10)/10, 1))
	case d < time.Hour:
		return l.T("duration.minsec", "M", int(d.Minutes()), "S", int(d.Seconds())%60)
	}
	return l.T("duration.hourmin", "H", int(d.Hours()), "M", int(d.Minutes())%60)
}

// decimal shows f in l's number format with at most places decimals and no trailing zeros:
// "1,5", "2", "12,25" / "1.5", "2", "12.25".
func decimal(l *i18n.Localizer, f float64, places int) string {
	n := 0
	for scale := 1.0; n < places; n, scale = n+1, scale*10 {
		if v := f * scale; math.Abs(v-math.Round(v)) < 1e-9*math.Max(1, math.Abs(v)) {
			break
		}
	}
	return l.Number(f, n)
}

// attemptDuration is how long an attempt's request took: as the engine measured it, else
// (attempts from before it did) from its start to its end.
func attemptDuration(l *i18n.Localizer, a *models.StepAttempt) string {
	if a.DurationUs != nil {
		return displayDuration(l, time.Duration(*a.DurationUs)*time.Microsecond)
	}
	return span(l, a.StartedAt, a.FinishedAt)
}

func span(l *i18n.Localizer, from, to *time.Time) string {
	if from == nil || to == nil {
		return ""
	}
	return displayDuration(l, to.Sub(*from))
}

func prettyJSON(j []byte) string {
	if len(j) == 0 || string(j) == "null" {
		return ""
	}
	var v any
	if json.Unmarshal(j, &v) != nil {
		return string(j)
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

func shortID(id string) string {
	if i := strings.IndexByte(id, '-'); i > 0 {
		return id[:i]
	}
	return id
}
