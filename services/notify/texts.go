package notify

import (
	"cmp"
	"fmt"
	"html"
	"regexp"
	"strings"
	"time"

	"lifeline/models"
)

// DefaultLanguage is the language of a recipient with no saved language in an organization
// with none: Lifeline's offices are Polish.
const DefaultLanguage = "pl"

// Texts are the notification texts by language: the message files of views/i18n
// (notifytexts.<lang>.json, ids "notify.…"; error types "errortype.<type>"), which
// cmd/web hands over as i18n.Catalog. A language is added there, in one place.
type Texts interface {
	// Text returns message id in lang filled with data (pairs of name and value).
	Text(lang, id string, data ...any) string
	// Supported reports whether lang has messages.
	Supported(lang string) bool
}

// ServiceTexts is what Texts may also do: say a service's text (an error's reason, a failure
// group's title) in a language, as pages show it (views/i18n's Localizer.Text: Lifeline's
// wrapper translated, the service's own words kept). Texts without it leave such texts as
// they are.
type ServiceTexts interface {
	Translate(lang, s string) string
}

// TimeTexts is what Texts may also do: write a time in a language and zone as pages do
// (views/i18n's Catalog.Time). Texts without it write "2026-11-23 10:00:10 CET".
type TimeTexts interface {
	Time(lang string, zone *time.Location, t time.Time) string
}

// serviceText is s, a service's text, in language l when the texts can say it.
func (s *Service) serviceText(l, text string) string {
	if t, ok := s.cfg.Texts.(ServiceTexts); ok {
		return t.Translate(l, text)
	}
	return text
}

// idTexts stands in when no Texts are configured: every text is its id.
type idTexts struct{}

func (idTexts) Text(_, id string, _ ...any) string { return id }
func (idTexts) Supported(l string) bool            { return l == DefaultLanguage }

// lang is l when it has texts, else DefaultLanguage.
func (s *Service) lang(l string) string {
	if s.cfg.Texts.Supported(l) {
		return l
	}
	return DefaultLanguage
}

// tr is the notification text k ("title.dlq") in l, filled with data.
func (s *Service) tr(l, k string, data ...any) string {
	return s.cfg.Texts.Text(l, "notify."+k, data...)
}

// recipientCtx is what a message is rendered for.
type recipientCtx struct {
	Lang string
	Zone *time.Location
	// times writes a time in Lang and Zone (nil: the texts cannot; time's own format).
	times TimeTexts
}

// time is t as the recipient reads it: in their language and zone, with the zone named.
func (r recipientCtx) time(t time.Time) string {
	z := r.Zone
	if z == nil {
		z = time.UTC
	}
	if r.times != nil {
		return r.times.Time(r.Lang, z, t)
	}
	return t.In(z).Format("2006-01-02 15:04:05 MST")
}

// offset is the zone's offset at t, in seconds.
func offset(t time.Time, z *time.Location) int {
	_, o := t.In(z).Zone()
	return o
}

// clock is t's time of day where the recipient is (15:04).
func (r recipientCtx) clock(t time.Time) string {
	z := r.Zone
	if z == nil {
		z = time.UTC
	}
	return t.In(z).Format("15:04")
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
	if decisionKind(ev.Kind) {
		return s.renderDecision(ev, rc)
	}
	l := s.lang(rc.Lang)
	tr := s.tr
	name := ev.WorkflowName
	if name == "" {
		name = ev.WorkflowID
	}
	m := Message{Lang: l, Link: s.link(ev.ExecutionID), LinkText: tr(l, "link")}
	intro := ""
	switch ev.Kind {
	case BreakerOpened:
		m.Title = tr(l, "title.breaker_opened", "Step", cmp.Or(ev.StepName, ev.StepID, ev.BreakerID), "Workflow", name)
		intro = tr(l, "intro.breaker_opened")
	case DLQ:
		m.Title = tr(l, "title.dlq", "Workflow", name)
		intro = tr(l, "intro.dlq")
		if ev.RetriesExhausted {
			intro = tr(l, "intro.dlq_exhausted")
		}
	case Test:
		m.Title = tr(l, "title.test")
		intro = tr(l, "intro.test")
	default:
		m.Title = tr(l, "title."+string(ev.Kind), "Workflow", name)
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
		et := s.cfg.Texts.Text(l, "errortype."+ev.ErrorType)
		if et == "errortype."+ev.ErrorType { // a type this version does not know
			et = ev.ErrorType
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
	m.Text, m.HTML = bodies(l, intro, m.Facts, m.Link, m.LinkText, tr(l, "footer"))
	return m
}

// renderDigest builds digest d of a workflow's minute: it names every failure it stands
// for (cov: the deliveries folded into it, by execution and client) and links to the list of
// exactly them, with their count.
func (s *Service) renderDigest(name string, d *models.NotificationDelivery, cov []Covered, rc recipientCtx) Message {
	l := s.lang(rc.Lang)
	tr := s.tr
	if name == "" {
		name = d.WorkflowID
	}
	n := len(cov)
	window := d.WindowStart
	m := Message{Lang: l, Title: tr(l, "title.digest", "Workflow", name, "Count", n),
		Link: s.failuresLink(d.ID), LinkText: tr(l, "link.failures", "Count", n)}
	// The minute's end is its clock alone, in full when the clocks change within it.
	end := window.Add(time.Minute)
	to := rc.clock(end)
	if rc.Zone != nil && offset(window, rc.Zone) != offset(end, rc.Zone) {
		to = rc.time(end)
	}
	intro := tr(l, "intro.digest", "From", rc.time(window), "To", to, "Count", n)
	m.Facts = append(m.Facts, Fact{tr(l, "fact.workflow"), fmt.Sprintf("%s (%s)", name, d.WorkflowID)})
	m.Facts = append(m.Facts, Fact{tr(l, "fact.count"), fmt.Sprint(n)})
	if n > 0 {
		m.Facts = append(m.Facts, Fact{tr(l, "fact.executions"), s.executionList(cov)})
	}
	m.Text, m.HTML = bodies(l, intro, m.Facts, m.Link, m.LinkText, tr(l, "footer"))
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
func bodies(l, intro string, facts []Fact, link, linkText, footer string) (string, string) {
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
	t.WriteString("\n-- \n" + footer + "\n")
	h.WriteString(`<p style="color:#666;font-size:smaller">` + html.EscapeString(footer) + "</p></body></html>")
	return t.String(), h.String()
}
