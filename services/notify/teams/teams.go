// Package teams posts notifications to Microsoft Teams through a Workflows (Power Automate)
// webhook as an Adaptive Card in a message envelope (github.com/atc0005/go-teams-notify/v2,
// adaptivecard), through the SSRF-guarded client of services/outbound. 202 is success.
//
// Errors: the library reports a non-2xx answer as text only, so the Sender records the
// status and Retry-After of the last response itself: 400, 403, 404 (notify.HTTPStatus) are
// permanent, 429 transient with its Retry-After, the rest transient. A refused address
// (outbound.ErrDenied) is permanent.
package teams

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	goteamsnotify "github.com/atc0005/go-teams-notify/v2"
	"github.com/atc0005/go-teams-notify/v2/adaptivecard"

	"lifeline/services/notify"
	"lifeline/services/outbound"
)

// Sender posts to Teams Workflows webhooks.
type Sender struct {
	client *http.Client
	// SkipURLCheck skips the library's own host patterns (loopback receivers in tests and
	// local setups; the URL was validated when it was saved).
	SkipURLCheck bool
}

var _ notify.Sender = (*Sender)(nil)

// New returns a Sender using client (outbound.NewClient).
func New(client *http.Client) *Sender { return &Sender{client: client} }

// Card returns the Adaptive Card message of m: a title, the intro, the facts and a button to
// the execution.
//
// Teams renders Markdown in a card's text blocks and facts: every text from m (a workflow's
// name, a subject, a step id, a reason, a compensation's message: data an execution's input
// can set) has its Markdown control characters escaped (EscapeMarkdown), so that a link,
// an image or emphasis in an input is shown as written, not rendered. The only link is the
// button built here, to m.Link.
func Card(m notify.Message) (*adaptivecard.Message, error) {
	card := adaptivecard.NewCard()
	intro := m.Text
	if i := strings.Index(intro, "\n\n"); i >= 0 {
		intro = intro[:i]
	}
	if err := card.AddElement(false, adaptivecard.NewTitleTextBlock(EscapeMarkdown(m.Title), true),
		adaptivecard.NewTextBlock(EscapeMarkdown(intro), true)); err != nil {
		return nil, err
	}
	if len(m.Facts) > 0 {
		fs := adaptivecard.NewFactSet()
		for _, f := range m.Facts {
			if err := fs.AddFact(adaptivecard.Fact{Title: EscapeMarkdown(f.Label), Value: EscapeMarkdown(f.Value)}); err != nil {
				return nil, err
			}
		}
		if err := card.AddFactSet(false, fs); err != nil {
			return nil, err
		}
	}
	if m.Link != "" {
		a, err := adaptivecard.NewActionOpenURL(m.Link, m.LinkText)
		if err != nil {
			return nil, err
		}
		if err := card.AddAction(false, a); err != nil {
			return nil, err
		}
	}
	msg, err := adaptivecard.NewMessageFromCard(card)
	if err != nil {
		return nil, err
	}
	return msg, msg.Prepare()
}

// Send posts m to the webhook m.To.
func (s *Sender) Send(ctx context.Context, m notify.Message) error {
	msg, err := Card(m)
	if err != nil {
		return notify.Permanentf("teams card: %v", err)
	}
	rec := &recorder{next: s.client.Transport}
	if rec.next == nil {
		rec.next = http.DefaultTransport
	}
	hc := *s.client
	hc.Transport = rec
	c := goteamsnotify.NewTeamsClient().SetHTTPClient(&hc)
	c.SkipWebhookURLValidationOnSend(s.SkipURLCheck)
	err = c.SendWithContext(ctx, m.To, msg)
	if err == nil {
		return nil
	}
	if errors.Is(err, outbound.ErrDenied) {
		return &notify.DeliveryError{Permanent: true, Err: err}
	}
	code, after := rec.last()
	if code >= 200 && code < 300 {
		// Accepted: the library wants a 200's body to be "1" (the old connectors' answer);
		// a Workflows webhook that answers otherwise has still taken the message.
		return nil
	}
	err = outbound.Describe(hostOf(m.To), err) // named by the URL's host, never the address it resolved to
	if code == 0 {
		return notify.Transient(fmt.Errorf("teams: %w", err), 0)
	}
	return notify.HTTPStatus(code, after, fmt.Errorf("teams: %w", err))
}

// hostOf is a URL's host and port as written ("" when it does not parse).
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

// markdownSpecial are the characters Teams' Markdown may read as formatting anywhere in a
// line: emphasis, code, links and images, headings, quotes, strikethrough, tables, HTML.
const markdownSpecial = "\\*_[]()#`><~|!{}"

// EscapeMarkdown escapes text from data for a card's text block or fact: a backslash before
// every character Markdown may read as formatting, and before what would start a list or a
// heading at the beginning of a line ("- ", "+ ", "1. ", "=").
func EscapeMarkdown(s string) string {
	var b strings.Builder
	for i, line := range strings.Split(s, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		rest := strings.TrimLeft(line, " \t")
		b.WriteString(line[:len(line)-len(rest)])
		digits := len(rest) - len(strings.TrimLeft(rest, "0123456789"))
		switch {
		case strings.HasPrefix(rest, "-"), strings.HasPrefix(rest, "+"), strings.HasPrefix(rest, "="):
			b.WriteByte('\\')
		case digits > 0 && len(rest) > digits && rest[digits] == '.': // "1)" is escaped below, with every ")"
			b.WriteString(rest[:digits])
			b.WriteByte('\\')
			rest = rest[digits:]
		}
		for _, r := range rest {
			if strings.ContainsRune(markdownSpecial, r) {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}

// recorder remembers the status and Retry-After of the last response.
type recorder struct {
	next  http.RoundTripper
	mu    sync.Mutex
	code  int
	after time.Duration
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err == nil {
		r.mu.Lock()
		r.code = resp.StatusCode
		r.after = retryAfter(resp.Header.Get("Retry-After"), time.Now())
		r.mu.Unlock()
	}
	return resp, err
}

func (r *recorder) last() (int, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.code, r.after
}

// retryAfter reads Retry-After: seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
