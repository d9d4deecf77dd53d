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
// button to the execution.
func Payload(m notify.Message) *slack.WebhookMessage {
	intro := m.Text
	if i := strings.Index(intro, "\n\n"); i >= 0 {
		intro = intro[:i]
	}
	blocks := []slack.Block{
		slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, clip(m.Title, 150), false, false)),
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, escape(intro), false, false), nil, nil),
	}
	var fields []*slack.TextBlockObject
	for _, f := range m.Facts {
		if len(fields) == 10 { // Slack's limit per section
			break
		}
		fields = append(fields, slack.NewTextBlockObject(slack.MarkdownType, clip("*"+escape(f.Label)+"*\n"+escape(f.Value), 2000), false, false))
	}
	if len(fields) > 0 {
		blocks = append(blocks, slack.NewSectionBlock(nil, fields, nil))
	}
	if m.Link != "" {
		btn := slack.NewButtonBlockElement("view_execution", "view", slack.NewTextBlockObject(slack.PlainTextType, m.LinkText, false, false))
		btn.URL = m.Link
		btn.Style = slack.StylePrimary
		blocks = append(blocks, slack.NewActionBlock("execution", btn))
	}
	return &slack.WebhookMessage{Text: m.Title, Blocks: &slack.Blocks{BlockSet: blocks}}
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

// escape escapes Slack's mrkdwn control characters.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
