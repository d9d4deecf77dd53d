// Package slack posts notifications to Slack incoming webhooks as Block Kit messages with a
// button to the execution (github.com/slack-go/slack), through the SSRF-guarded client of
// services/outbound (never slack-go's default client).
//
// Errors: 400, 403, 404 (and the other notify.HTTPStatus permanent codes) are permanent; 429
// is transient with its Retry-After; other failures are transient. A refused address
// (outbound.ErrDenied) is permanent.
package slack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"lifeline/services/notify"
	"lifeline/services/outbound"
)

// Sender posts to Slack webhooks.
type Sender struct{ client *http.Client }

var _ notify.Sender = (*Sender)(nil)

// New returns a Sender using client (outbound.NewClient).
func New(client *http.Client) *Sender { return &Sender{client: client} }

// Payload is the webhook message of m: a header, the intro, the facts as fields, and a
// button to the execution; its top-level text (notifications, clients without blocks) is
// the title and a link to the execution.
//
// Every text from m (a workflow's name, a subject, a step id, a reason, a compensation's
// message: data an execution's input can set) has Slack's control characters escaped
// (& < > as &amp; &lt; &gt;), in every field, so that "<!channel>" or "<url|label>" in an
// input is shown, not obeyed. The only link is the one built here, to m.Link, with its label
// escaped.
func Payload(m notify.Message) *slack.WebhookMessage {
	intro := m.Text
	if i := strings.Index(intro, "\n\n"); i >= 0 {
		intro = intro[:i]
	}
	blocks := []slack.Block{
		slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, escapeClip(m.Title, 150), false, false)),
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, escapeClip(intro, 3000), false, false), nil, nil),
	}
	var fields []*slack.TextBlockObject
	for _, f := range m.Facts {
		if len(fields) == 10 { // Slack's limit per section
			break
		}
		label := "*" + escapeClip(f.Label, 200) + "*\n"
		fields = append(fields, slack.NewTextBlockObject(slack.MarkdownType, label+escapeClip(f.Value, 2000-utf8.RuneCountInString(label)), false, false))
	}
	if len(fields) > 0 {
		blocks = append(blocks, slack.NewSectionBlock(nil, fields, nil))
	}
	text := escape(m.Title)
	if m.Link != "" {
		btn := slack.NewButtonBlockElement("view_execution", "view", slack.NewTextBlockObject(slack.PlainTextType, escapeClip(m.LinkText, 75), false, false))
		btn.URL = m.Link
		btn.Style = slack.StylePrimary
		blocks = append(blocks, slack.NewActionBlock("execution", btn))
		text += " " + link(m.Link, m.LinkText)
	}
	return &slack.WebhookMessage{Text: text, Blocks: &slack.Blocks{BlockSet: blocks}}
}

// Send posts m to the webhook m.To.
func (s *Sender) Send(ctx context.Context, m notify.Message) error {
	err := slack.PostWebhookCustomHTTPContext(ctx, m.To, s.client, Payload(m))
	if err == nil {
		return nil
	}
	var rl *slack.RateLimitedError
	var sc slack.StatusCodeError
	switch {
	case errors.Is(err, outbound.ErrDenied):
		return &notify.DeliveryError{Permanent: true, Err: err}
	case errors.As(err, &rl):
		return notify.Transient(fmt.Errorf("slack: 429 Too Many Requests, retry after %s", rl.RetryAfter), rl.RetryAfter)
	case errors.As(err, &sc) && sc.Code >= 200 && sc.Code < 300:
		return nil // accepted (Slack itself answers 200; a receiver may answer 201 or 204)
	case errors.As(err, &sc):
		return notify.HTTPStatus(sc.Code, 0, fmt.Errorf("slack: %s", sc.Status))
	}
	return notify.Transient(fmt.Errorf("slack: %w", outbound.Describe(hostOf(m.To), err)), 0)
}

// hostOf is a URL's host and port as written ("" when it does not parse).
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

// escaper escapes Slack's control characters: & < > (Slack decodes these three, and only
// these, for display).
var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// escape escapes Slack's control characters in text from data.
func escape(s string) string { return escaper.Replace(s) }

// escapeClip escapes s and clips it to at most n characters as sent (an ellipsis ends a
// clipped text; an escape is never cut in half).
func escapeClip(s string, n int) string {
	if e := escape(s); utf8.RuneCountInString(e) <= n {
		return e
	}
	var b strings.Builder
	used := 0
	for _, r := range s {
		e := escape(string(r))
		if used+utf8.RuneCountInString(e) > n-1 {
			break
		}
		b.WriteString(e)
		used += utf8.RuneCountInString(e)
	}
	return b.String() + "…"
}

// link is a Slack link built here: <url|label>, the label escaped and the URL unable to end
// the link early.
func link(target, label string) string {
	target = strings.NewReplacer("&", "&amp;", "<", "%3C", ">", "%3E", "|", "%7C").Replace(target)
	return "<" + target + "|" + escape(label) + ">"
}
