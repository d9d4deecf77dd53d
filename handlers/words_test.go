package handlers_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// rawValue finds, as whole words, what Lifeline stores and must say in words on a Polish page:
// role names, error types, statuses of executions, steps and dead letters, breaker states,
// settings' values (unknown errors, notification modes and channels' switches) and the JSON
// paths of settings. A value joined to another word by "-", "_", "." or ":" is a different
// word (an e-mail address, "role:admin" in a field's syntax, a URL).
var rawValue = regexp.MustCompile(`(?:^|[^\p{L}\p{N}_.:/@-])(owner|admin|accountant|viewer|transient|permanent|timeout|validation|authorization|rate_limit|external_service|internal|unknown|` +
	`retry|no_retry|digest|immediate|PENDING|RUNNING|SUCCEEDED|FAILED|COMPLETED|PARTIAL|DLQ_PENDING|ROLLING_BACK|ROLLED_BACK|ROLLBACK_FAILED|CANCELLED|SKIPPED|COMPENSATED|` +
	`pending|processing|resolved|skipped|expired|closed|open|half_open|errorNotifications|settings\.[A-Za-z]+)(?:$|[^\p{L}\p{N}_.:/@-]|\.(?:\s|$))`)

// visibleText is what a reader sees of a page: its text outside script, style, template and
// the elements that quote code or data as it is (code, pre, kbd, samp, textarea), and
// without attributes. Elements hidden from everyone (hidden, or the visually-hidden labels'
// opposite, aria-hidden decoration) are read too: a screen reader or a later state shows
// most of them.
func visibleText(t *testing.T, body string) string {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "script", "style", "template", "code", "pre", "kbd", "samp", "textarea", "noscript":
				return
			}
		}
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
			b.WriteString(" ")
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return strings.Join(strings.Fields(b.String()), " ")
}

// rawValuesIn returns each raw value found in text with a little of its context.
func rawValuesIn(text string) []string {
	var out []string
	for _, m := range rawValue.FindAllStringSubmatchIndex(text, -1) {
		from, to := m[2], m[3]
		out = append(out, fmt.Sprintf("%q in …%s…", text[from:to], text[max(0, from-60):min(len(text), to+40)]))
	}
	return out
}

func TestRawValuePattern(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]bool{
		"Twoja rola (accountant) nie wystarcza": true, "Nieznane błędy: retry": true, "Status: DLQ_PENDING.": true,
		"settings.errorNotifications przepływu": true, "Tryb: digest": true, "Typ: transient": true,
		"admin@demo.lifeline.local": false, "role:admin": false, "administrator": false, "księgowy": false,
		"Ponów": false, "open-source": false, "https://example.com/open": false,
	} {
		if got := len(rawValuesIn(text)) > 0; got != want {
			t.Errorf("%q: found %v, want %v", text, got, want)
		}
	}
}

// TestPolishPagesSayValuesInWords: every page, rendered through the router in Polish as each
// role (admin, accountant, viewer), names roles, error types, statuses and settings' values in
// words, never as the value stored (admin, transient, DLQ_PENDING, digest…), nor settings by
// their JSON path; code and pre blocks, where quoting a value is the point, are left out.
// Refusals (403) are read too: they say which role is needed.
func TestPolishPagesSayValuesInWords(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Słowa")
		exID, dlID := a.failed(rs, "Kowalski")
		// The API tokens' names are the admin's words: the setup named one for its role.
		if err := db.Conn(t.Context()).Model(&models.APIToken{}).Where("organization_id = ?", rs.org).Update("name", "Integracja biura").Error; err != nil {
			t.Fatal(err)
		}
		pages := []string{"/workflows", "/workflows/" + rs.wf, "/executions", "/executions/" + exID, "/dlq", "/dlq/" + dlID,
			"/breakers", "/profile", "/audit", "/settings/tokens", "/settings/connections", "/settings/credentials", "/settings/health",
			"/dlq/items?errorType=validation", "/executions?status=DLQ_PENDING"}
		for _, who := range []*tenant{rs.tenant, rs.accountant, rs.viewer} {
			b, _ := a.browser(who)
			for _, p := range pages {
				r := do(t, b, "GET", a.srv.URL+p, "", map[string]string{"Accept-Language": "pl"})
				if r.status != 200 && r.status != 403 {
					t.Errorf("%s as %s: %d", p, who.email, r.status)
					continue
				}
				if !strings.Contains(r.body, `lang="pl"`) {
					t.Errorf("%s as %s is not in Polish", p, who.email)
				}
				for _, f := range rawValuesIn(visibleText(t, r.body)) {
					t.Errorf("%s as %s (%d): %s", p, who.email, r.status, f)
				}
			}
		}

		// The error type's tooltip says what the reader's role can do: the accountant fixes the
		// data, the viewer is told who can.
		tip := map[string]string{}
		for _, who := range []*tenant{rs.accountant, rs.viewer} {
			b, _ := a.browser(who)
			chips := parseListDoc(t, do(t, b, "GET", a.srv.URL+"/dlq/"+dlID, "", map[string]string{"Accept-Language": "pl"}).body).testID("error-type")
			if len(chips) == 0 {
				t.Fatalf("no error type on the item's page for %s", who.email)
			}
			tip[who.email] = chips[0].attr("title")
		}
		if a, v := tip[rs.accountant.email], tip[rs.viewer.email]; !strings.Contains(a, "popraw je i ponów") || strings.Contains(v, "popraw je") ||
			!strings.Contains(v, "może księgowy lub administrator") {
			t.Errorf("validation's tooltip: accountant %q, viewer %q", a, v)
		}
	})
}

// TestPolishNotificationPagesSayValuesInWords: the same for the notification pages (the
// organization's settings, a workflow's, the delivery log and the inbox).
func TestPolishNotificationPagesSayValuesInWords(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newNotifApp(t, db)
		nt := a.tenant("Biuro Słów")
		pages := []string{"/settings/notifications", "/notifications/deliveries", "/notifications", "/workflows/" + nt.wf + "/notifications",
			"/workflows/" + nt.wf + "/notifications/edit"}
		for _, who := range []*tenant{nt.admin, nt.accountant, nt.viewer} {
			b, _ := a.browser(who)
			for _, p := range pages {
				r := do(t, b, "GET", a.srv.URL+p, "", map[string]string{"Accept-Language": "pl"})
				if r.status != 200 && r.status != 403 {
					t.Errorf("%s as %s: %d", p, who.email, r.status)
					continue
				}
				for _, f := range rawValuesIn(visibleText(t, r.body)) {
					t.Errorf("%s as %s (%d): %s", p, who.email, r.status, f)
				}
			}
		}
	})
}
