package notify

import (
	"cmp"
	"fmt"
	"html"
	"regexp"
	"strings"
	"time"
)

// DefaultLanguage is the language of a recipient with no saved language in an organization
// with none: Lifeline's offices are Polish.
const DefaultLanguage = "pl"

// texts holds every notification text in both languages (a test checks both have every
// key). Values are fmt formats.
var texts = map[string]map[string]string{
	"pl": {
		"title.first_failure":   "Błąd w przepływie „%s”",
		"title.retry_exhausted": "Wyczerpano ponowienia w przepływie „%s”",
		"title.dlq":             "Wykonanie przepływu „%s” trafiło do kolejki DLQ",
		"title.breaker_opened":  "Otwarto bezpiecznik: „%s” w przepływie „%s”",
		"title.compensation":    "Rollback przepływu „%s”",
		"title.digest":          "Przepływ „%s”: %d kolejnych powiadomień w ciągu minuty",
		"title.test":            "Lifeline: powiadomienie testowe",
		"intro.first_failure":   "Krok wykonania zakończył się błędem; wykonanie będzie ponawiane.",
		"intro.retry_exhausted": "Krok wykonania wyczerpał wszystkie ponowienia.",
		"intro.dlq":             "Wykonanie zakończyło się błędem i czeka w kolejce DLQ na decyzję.",
		"intro.dlq_exhausted":   "Krok wyczerpał wszystkie ponowienia; wykonanie czeka w kolejce DLQ na decyzję.",
		"intro.breaker_opened":  "Bezpiecznik otworzył się po serii błędów: wywołania są wstrzymane do czasu próby.",
		"intro.compensation":    "Wiadomość kompensacji z rollbacku wykonania:",
		"intro.digest":          "Od %s do %s przepływ zgłosił %d kolejnych błędów. Zamiast osobnych wiadomości wysyłamy podsumowanie.",
		"intro.test":            "To jest powiadomienie testowe z Lifeline. Jeśli je widzisz, kanał działa.",
		"fact.workflow":         "Przepływ",
		"fact.execution":        "Wykonanie",
		"fact.subject":          "Dotyczy",
		"fact.step":             "Krok",
		"fact.error_type":       "Typ błędu",
		"fact.reason":           "Przyczyna",
		"fact.breaker":          "Bezpiecznik",
		"fact.time":             "Czas",
		"fact.executions":       "Wykonania",
		"link":                  "Zobacz wykonanie",
		"link.digest":           "Zobacz wykonania",
		"footer":                "Wiadomość wysłana przez Lifeline. Ustawienia powiadomień zmienia administrator organizacji.",
		"more":                  "…i %d więcej",
	},
	"en": {
		"title.first_failure":   "Workflow “%s” failed",
		"title.retry_exhausted": "Workflow “%s” ran out of retries",
		"title.dlq":             "An execution of workflow “%s” went to the dead-letter queue",
		"title.breaker_opened":  "Circuit breaker opened: “%s” in workflow “%s”",
		"title.compensation":    "Rollback of workflow “%s”",
		"title.digest":          "Workflow “%s”: %d more notifications in a minute",
		"title.test":            "Lifeline: test notification",
		"intro.first_failure":   "A step of the execution failed; the execution will be retried.",
		"intro.retry_exhausted": "A step of the execution used up all its retries.",
		"intro.dlq":             "The execution failed and waits in the dead-letter queue for a decision.",
		"intro.dlq_exhausted":   "A step used up all its retries; the execution waits in the dead-letter queue for a decision.",
		"intro.breaker_opened":  "The breaker opened after a run of failures: calls are held until it tries again.",
		"intro.compensation":    "A compensation message from the execution's rollback:",
		"intro.digest":          "From %s to %s the workflow reported %d more failures. Instead of one message each, here is a digest.",
		"intro.test":            "This is a test notification from Lifeline. If you see it, the channel works.",
		"fact.workflow":         "Workflow",
		"fact.execution":        "Execution",
		"fact.subject":          "Subject",
		"fact.step":             "Step",
		"fact.error_type":       "Error type",
		"fact.reason":           "Reason",
		"fact.breaker":          "Breaker",
		"fact.time":             "Time",
		"fact.executions":       "Executions",
		"link":                  "View the execution",
		"link.digest":           "View the executions",
		"footer":                "Sent by Lifeline. The organization's admins change the notification settings.",
		"more":                  "…and %d more",
	},
}

// Error type labels, as the app shows them.
var errorTypes = map[string]map[string]string{
	"pl": {"transient": "przejściowy", "permanent": "trwały", "timeout": "przekroczony czas", "validation": "walidacja",
		"authorization": "autoryzacja", "rate_limit": "limit zapytań", "external_service": "usługa zewnętrzna",
		"internal": "wewnętrzny", "unknown": "nieznany"},
	"en": {"transient": "transient", "permanent": "permanent", "timeout": "timeout", "validation": "validation",
		"authorization": "authorization", "rate_limit": "rate limit", "external_service": "external service",
		"internal": "internal", "unknown": "unknown"},
}

func lang(l string) string {
	if _, ok := texts[l]; ok {
		return l
	}
	return DefaultLanguage
}

func tr(l, k string, args ...any) string {
	f, ok := texts[lang(l)][k]
	if !ok {
		f = texts["en"][k]
	}
	if len(args) == 0 {
		return f
	}
	return fmt.Sprintf(f, args...)
}

// recipientCtx is what a message is rendered for.
type recipientCtx struct {
	Lang string
	Zone *time.Location
}

func (r recipientCtx) time(t time.Time) string {
	z := r.Zone
	if z == nil {
		z = time.UTC
	}
	return t.In(z).Format("2006-01-02 15:04:05 MST")
}

// link returns the absolute URL of an execution's page.
func (s *Service) link(executionID string) string {
	if executionID == "" {
		return ""
	}
	return s.cfg.BaseURL + s.cfg.ExecutionPath(executionID)
}

// render builds the message of an event for a recipient.
func (s *Service) render(ev Event, rc recipientCtx) Message {
	l := lang(rc.Lang)
	name := ev.WorkflowName
	if name == "" {
		name = ev.WorkflowID
	}
	m := Message{Lang: l, Link: s.link(ev.ExecutionID), LinkText: tr(l, "link")}
	intro := ""
	switch ev.Kind {
	case BreakerOpened:
		m.Title = tr(l, "title.breaker_opened", cmp.Or(ev.StepName, ev.StepID, ev.BreakerID), name)
		intro = tr(l, "intro.breaker_opened")
	case DLQ:
		m.Title = tr(l, "title.dlq", name)
		intro = tr(l, "intro.dlq")
		if ev.RetriesExhausted {
			intro = tr(l, "intro.dlq_exhausted")
		}
	case Test:
		m.Title = tr(l, "title.test")
		intro = tr(l, "intro.test")
	default:
		m.Title = tr(l, "title."+string(ev.Kind), name)
		intro = tr(l, "intro."+string(ev.Kind))
	}
	if ev.Subject != "" && ev.Kind != BreakerOpened { // which client: the first thing a person scanning a mailbox looks for
		m.Title += " – " + ev.Subject
	}
	if ev.Kind == Compensation && ev.Message != "" {
		intro += "\n" + ev.Message
	}
	if ev.WorkflowID != "" {
		m.Facts = append(m.Facts, Fact{tr(l, "fact.workflow"), fmt.Sprintf("%s (%s)", name, ev.WorkflowID)})
	}
	if ev.ExecutionID != "" {
		m.Facts = append(m.Facts, Fact{tr(l, "fact.execution"), ev.ExecutionID})
	}
	if ev.Subject != "" {
		m.Facts = append(m.Facts, Fact{tr(l, "fact.subject"), ev.Subject})
	}
	if ev.StepID != "" || ev.StepName != "" {
		step := ev.StepID
		if ev.StepName != "" && ev.StepName != ev.StepID {
			step = fmt.Sprintf("%s (%s)", ev.StepName, ev.StepID)
		}
		m.Facts = append(m.Facts, Fact{tr(l, "fact.step"), step})
	}
	if ev.ErrorType != "" {
		et := ev.ErrorType
		if x, ok := errorTypes[l][et]; ok {
			et = x
		}
		if ev.ErrorCode != "" {
			et += " · " + ev.ErrorCode
		}
		m.Facts = append(m.Facts, Fact{tr(l, "fact.error_type"), et})
	}
	if ev.Reason != "" {
		m.Facts = append(m.Facts, Fact{tr(l, "fact.reason"), firstLines(ev.Reason)})
	}
	if ev.BreakerID != "" {
		m.Facts = append(m.Facts, Fact{tr(l, "fact.breaker"), ev.BreakerID})
	}
	m.Facts = append(m.Facts, Fact{tr(l, "fact.time"), rc.time(ev.At)})
	m.Text, m.HTML = bodies(l, intro, m.Facts, m.Link, m.LinkText)
	return m
}

// renderDigest builds the digest of n folded events of a workflow in a minute.
func (s *Service) renderDigest(name, workflowID string, window time.Time, execs []string, n int, rc recipientCtx) Message {
	l := lang(rc.Lang)
	if name == "" {
		name = workflowID
	}
	m := Message{Lang: l, Title: tr(l, "title.digest", name, n), LinkText: tr(l, "link.digest")}
	intro := tr(l, "intro.digest", rc.time(window), rc.time(window.Add(time.Minute)), n)
	m.Facts = append(m.Facts, Fact{tr(l, "fact.workflow"), fmt.Sprintf("%s (%s)", name, workflowID)})
	var links []string
	for i, e := range execs {
		if i == 10 {
			links = append(links, tr(l, "more", len(execs)-10))
			break
		}
		links = append(links, s.link(e))
	}
	if len(links) > 0 {
		m.Facts = append(m.Facts, Fact{tr(l, "fact.executions"), strings.Join(links, "\n")})
		m.Link = s.link(execs[0])
	}
	m.Text, m.HTML = bodies(l, intro, m.Facts, m.Link, m.LinkText)
	return m
}

// stackLine matches the lines of a stack trace (Go, Java, JS, Python).
var stackLine = regexp.MustCompile(`^\s*(at\s|goroutine\s\d|File "|Traceback|\S+\.(go|js|ts|java|py):\d+)|\.go:\d+\b|^\s+\S+\(.*\)$`)

// firstLines keeps a reason short and free of stack traces: stack lines dropped, at most 5
// lines and 1,000 characters.
func firstLines(s string) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if !stackLine.MatchString(l) {
			lines = append(lines, l)
		}
	}
	if len(lines) > 5 {
		lines = lines[:5]
	}
	out := strings.Join(lines, "\n")
	if r := []rune(out); len(r) > 1000 {
		out = string(r[:1000]) + "…"
	}
	return out
}

// bodies returns the plain-text and HTML bodies.
func bodies(l, intro string, facts []Fact, link, linkText string) (string, string) {
	var t, h strings.Builder
	t.WriteString(intro + "\n\n")
	h.WriteString(`<!doctype html><html lang="` + l + `"><body style="font-family:sans-serif">`)
	h.WriteString("<p>" + strings.ReplaceAll(html.EscapeString(intro), "\n", "<br>") + "</p><table>")
	for _, f := range facts {
		t.WriteString(f.Label + ": " + f.Value + "\n")
		h.WriteString(`<tr><th style="text-align:left;vertical-align:top;padding-right:1em">` + html.EscapeString(f.Label) +
			"</th><td>" + strings.ReplaceAll(html.EscapeString(f.Value), "\n", "<br>") + "</td></tr>")
	}
	h.WriteString("</table>")
	if link != "" {
		t.WriteString("\n" + linkText + ": " + link + "\n")
		h.WriteString(`<p><a href="` + html.EscapeString(link) + `">` + html.EscapeString(linkText) + "</a></p>")
	}
	t.WriteString("\n-- \n" + tr(l, "footer") + "\n")
	h.WriteString(`<p style="color:#666;font-size:smaller">` + html.EscapeString(tr(l, "footer")) + "</p></body></html>")
	return t.String(), h.String()
}
