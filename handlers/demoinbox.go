package handlers

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"

	"github.com/labstack/echo/v4"

	"lifeline/services/demo"
	"lifeline/services/notify/email"
	"lifeline/services/sandbox"
	"lifeline/views/pages"
)

// DemoInbox is what the demo's stand-ins received: the local SMTP server's emails and the
// messages posted to the sandbox's Slack and Teams webhooks.
type DemoInbox interface {
	Emails() []email.Received
	Hooks() []sandbox.Hook
}

// DemoInboxHandler serves /demo/inbox (the demo only): a newcomer sees the notifications
// Lifeline sent without a mail server or a Slack workspace.
type DemoInboxHandler struct {
	*chrome
	inbox DemoInbox
}

// newDemoInboxHandler returns the handler.
func newDemoInboxHandler(ch *chrome, inbox DemoInbox) *DemoInboxHandler {
	return &DemoInboxHandler{chrome: ch, inbox: inbox}
}

// Show renders the inbox, newest first.
func (h *DemoInboxHandler) Show(c echo.Context) error {
	l := localizer(c)
	vm := pages.DemoInboxVM{}
	vm.DeliveriesURL = h.url("notifications.deliveries") // "" without notifications
	// The KSeF portal's new token for the office, whose old one expired (sandbox, office.go).
	vm.KSeFToken, vm.CredentialName, vm.CredentialsURL = sandbox.NewKSeFToken, demo.CredentialKSeF, h.url("credentials")
	mails := h.inbox.Emails()
	for i := len(mails) - 1; i >= 0; i-- {
		r := mails[i].Read()
		m := pages.DemoEmail{To: r.To, Subject: r.Subject, Lang: r.Lang, Text: r.Text}
		if !r.Date.IsZero() {
			m.At, m.AtText = rfc(r.Date), displayTime(l, r.Date)
		}
		vm.Emails = append(vm.Emails, m)
	}
	for _, k := range h.inbox.Hooks() {
		vm.Hooks = append(vm.Hooks, pages.DemoHook{At: rfc(k.At), AtText: displayTime(l, k.At), Channel: k.Channel,
			Summary: hookSummary(k), JSON: prettyJSON(k.Body)})
	}
	return render(c, http.StatusOK, pages.DemoInbox(h.page(c, "demoinbox.title", "demoinbox"), vm))
}

// hookSummary is a webhook message's text as its channel shows it: Slack's "text" (a link
// as its label, &amp; &lt; &gt; as the characters), or the first TextBlock of the Adaptive
// Card a Teams message carries (Markdown's escapes undone).
func hookSummary(k sandbox.Hook) string {
	var msg struct {
		Text        string `json:"text"`
		Attachments []struct {
			Content struct {
				Body []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"body"`
			} `json:"content"`
		} `json:"attachments"`
	}
	if json.Unmarshal(k.Body, &msg) != nil {
		return ""
	}
	if msg.Text != "" {
		return slackUnescaper.Replace(slackLink.ReplaceAllString(msg.Text, "$1"))
	}
	for _, a := range msg.Attachments {
		for _, b := range a.Content.Body {
			if b.Type == "TextBlock" && b.Text != "" {
				return markdownEscape.ReplaceAllString(b.Text, "$1")
			}
		}
	}
	return ""
}

var (
	// slackLink is a Slack link, <url|label>.
	slackLink      = regexp.MustCompile(`<[^|>]*\|([^>]*)>`)
	slackUnescaper = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&")
	// markdownEscape is a backslash before an ASCII punctuation character.
	markdownEscape = regexp.MustCompile("\\\\([!-/:-@\\[-`{-~])")
)
