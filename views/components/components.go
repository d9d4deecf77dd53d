// Package components holds small, reusable templ components (badges, chips,
// empty states, JSON blocks, form helpers) shared by layouts and pages.
//
// Every component is a pure function of its arguments. Strings are rendered
// as text (escaped by templ); nothing here uses templ.Raw.
package components

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"time"

	"lifeline/views/i18n"
)

// StatusTone maps an execution, step, attempt or dead-letter status to the
// colour family used by StatusBadge ("ok", "info", "neutral", "warn",
// "danger", "partial"). Matching is case-insensitive; unknown statuses are
// "neutral".
func StatusTone(status string) string {
	switch strings.ToLower(strings.TrimSpace(status)) {
	case "succeeded", "success", "completed", "resolved", "ok", "delivered":
		return "ok"
	case "running", "processing", "in_progress":
		return "info"
	case "pending", "queued", "scheduled", "waiting":
		return "neutral"
	case "retrying", "compensating", "cancelling", "rolling_back", "rollback_failed":
		return "warn"
	case "failed", "dlq", "dlq_pending", "error", "timed_out", "timeout":
		return "danger"
	case "partial", "partially_succeeded":
		return "partial"
	case "skipped", "expired", "cancelled", "canceled", "compensated", "replaced", "not_run", "rolled_back":
		return "muted"
	}
	return "neutral"
}

// statusLabel is the visible text of a badge: the status with underscores
// turned into spaces ("DLQ_PENDING" → "DLQ PENDING"). The raw value stays in
// data-status.
func statusLabel(status string) string {
	return strings.ReplaceAll(strings.TrimSpace(status), "_", " ")
}

// ErrorTypeFamily groups the classifier's error types for colouring:
// "retryable" (transient, timeout, rate_limit, external_service),
// "permanent" (permanent, validation, authorization) and "other"
// (internal, unknown and anything new).
func ErrorTypeFamily(t string) string {
	switch strings.ToLower(t) {
	case "transient", "timeout", "rate_limit", "external_service":
		return "retryable"
	case "permanent", "validation", "authorization":
		return "permanent"
	}
	return "other"
}

// errorTypeHint explains an error type in one sentence (used as title): "Transient: a
// temporary problem; retried automatically." Where what to do depends on the reader's role
// (WithRole), the role's own sentence (errortype.<type>.hint.<role>) comes first: a viewer
// is not told to fix the data, an accountant not to upload credentials.
func errorTypeHint(ctx context.Context, t string) string {
	l := i18n.From(ctx)
	hint := l.TOr("errortype."+t+".hint", "")
	if r := roleOf(ctx); r != "" {
		hint = l.TOr("errortype."+t+".hint."+r, hint)
	}
	return l.TOr("errortype."+t, errorTypeLabel(t)) + ": " + hint
}

func errorTypeLabel(t string) string {
	return strings.ReplaceAll(t, "_", " ")
}

// PrettyJSON indents valid JSON with two spaces and returns anything else
// unchanged, so a broken payload is still shown exactly as stored.
func PrettyJSON(s string) string {
	trimmed := strings.TrimSpace(s)
	if trimmed == "" || !json.Valid([]byte(trimmed)) {
		return s
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(trimmed), "", "  "); err != nil {
		return s
	}
	return buf.String()
}

// utcTitle is an RFC 3339 instant in UTC, for a tooltip ("2026-11-23 13:05:00 UTC").
func utcTitle(ctx context.Context, iso string) string {
	t, err := time.Parse(time.RFC3339Nano, iso)
	if err != nil {
		return iso
	}
	return i18n.From(ctx).UTC(t)
}

// Dash returns s, or an em dash when s is blank.
func Dash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "—"
	}
	return s
}
