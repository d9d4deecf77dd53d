package pages

import (
	"context"
	"fmt"
	"lifeline/views/i18n"
	"slices"
	"sort"
	"strings"

	"lifeline/views/components"
)

// sortedErrors returns the keys of a field-error map in a stable, natural
// order, so "steps[2]" comes before "steps[10]".
func sortedErrors(errs map[string]string) []string {
	keys := make([]string, 0, len(errs))
	for k := range errs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return naturalLess(keys[i], keys[j]) })
	return keys
}

// naturalLess compares strings treating runs of digits as numbers.
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := isDigit(a[0]), isDigit(b[0])
		if da && db {
			na, ra := splitDigits(a)
			nb, rb := splitDigits(b)
			na2, nb2 := strings.TrimLeft(na, "0"), strings.TrimLeft(nb, "0")
			if len(na2) != len(nb2) {
				return len(na2) < len(nb2)
			}
			if na2 != nb2 {
				return na2 < nb2
			}
			a, b = ra, rb
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func splitDigits(s string) (digits, rest string) {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return s[:i], s[i:]
}

// otherErrors lists the error keys except the ones shown next to a field.
func otherErrors(errs map[string]string, shown ...string) []string {
	var out []string
	for _, k := range sortedErrors(errs) {
		if !slices.Contains(shown, k) {
			out = append(out, k)
		}
	}
	return out
}

func hasErrors(errs map[string]string, formError string) bool {
	return len(errs) > 0 || formError != ""
}

func ariaInvalid(invalid bool) string {
	if invalid {
		return "true"
	}
	return "false"
}

func startInput(s string) string {
	if strings.TrimSpace(s) == "" {
		return "{}"
	}
	return s
}

func attemptCount(ctx context.Context, n int) string {
	if n == 0 {
		return i18n.T(ctx, "count.noattempts")
	}
	return i18n.N(ctx, "count.attempts", n)
}

// stepOpen reports whether a step of the timeline starts expanded: steps
// that failed, are retrying, or are running now.
func stepOpen(s StepVM) bool {
	if s.Handler && len(s.Attempts) > 0 { // what the handler did with the failure
		return true
	}
	switch components.StatusTone(s.Status) {
	case "danger", "warn", "info", "partial":
		return true
	}
	return false
}

// dlqRowClass marks dead letters that still need someone (pending) with the
// red edge used for failed executions.
func dlqRowClass(status string) string {
	if strings.EqualFold(status, "pending") {
		return "row--danger"
	}
	return "row--" + components.StatusTone(status)
}

func attemptHasDetails(a AttemptVM) bool {
	return a.InputJSON != "" || a.OutputJSON != "" || a.StackTrace != "" || a.IdempotencyKey != ""
}

func attemptDetailsLabel(ctx context.Context, a AttemptVM) string {
	l := i18n.From(ctx)
	var parts []string
	if a.InputJSON != "" {
		parts = append(parts, l.T("attempt.part.input"))
	}
	if a.OutputJSON != "" {
		parts = append(parts, l.T("attempt.part.output"))
	}
	if a.StackTrace != "" {
		parts = append(parts, l.T("attempt.part.trace"))
	}
	if len(parts) == 0 {
		return l.T("attempt.details")
	}
	s := strings.Join(parts, ", ")
	if i := strings.LastIndex(s, ", "); i >= 0 {
		s = s[:i] + " " + l.T("list.and") + " " + s[i+2:]
	}
	return l.T("attempt.show", "Parts", s)
}

func domID(prefix string, parts ...any) string {
	var b strings.Builder
	b.WriteString(prefix)
	for _, p := range parts {
		b.WriteByte('-')
		for _, r := range fmt.Sprint(p) {
			if r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
				b.WriteRune(r)
			} else {
				b.WriteByte('_')
			}
		}
	}
	return b.String()
}

// errorTitle returns the message id of the title of an HTTP error status.
func errorTitle(status int) string {
	switch status {
	case 400, 401, 403, 404, 409, 422, 429:
		return fmt.Sprintf("error.title.%d", status)
	}
	if status >= 500 {
		return "error.title.500"
	}
	return "error.title"
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// triggerLabel names how an execution was started ("by hand", "webhook", …).
func triggerLabel(ctx context.Context, trigger string) string {
	if trigger == "" {
		return "—"
	}
	return i18n.From(ctx).TOr("trigger."+trigger, trigger)
}

// refMark stands for the link in a message that embeds one ({{.Step}}).
const refMark = "\x00"

// refBefore and refAfter are the parts of message key before and after its {{.Step}}.
func refBefore(ctx context.Context, key string) string {
	before, _, _ := strings.Cut(i18n.T(ctx, key, "Step", refMark), refMark)
	return before
}

func refAfter(ctx context.Context, key string) string {
	_, after, _ := strings.Cut(i18n.T(ctx, key, "Step", refMark), refMark)
	return after
}
