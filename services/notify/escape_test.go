package notify_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/notify/teams"
)

// stringsOf are every string in a JSON document, keys left out.
func stringsOf(t *testing.T, raw []byte) []string {
	t.Helper()
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("not JSON: %s", raw)
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case []any:
			for _, x := range v {
				walk(x)
			}
		case map[string]any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	return out
}

// Issue 19: what an execution's input can set (the workflow's name, the subject, a step's
// name, the reason) cannot ride into Slack as a mention or a link, or into Teams as
// Markdown: Slack gets & < > escaped in every field, its top-level text included; Teams gets
// Markdown's control characters escaped in every text block and fact. The links Lifeline
// builds stay links. Asserted on what real loopback webhooks received.
func TestSlackAndTeamsEscapeData(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newEnv(t, db)
		sl := newReceiver(t, 200)
		tm := newReceiver(t, 202)
		e.settings(t, e.org.id, fmt.Sprintf(`{"channels": ["slack", "teams"], "slackWebhookUrl": %q, "teamsWebhookUrl": %q}`,
			sl.URL+"/services/T1/B1/x", tm.URL+"/workflows/1"))
		exec := models.NewID()
		ev := e.dlqEvent(exec)
		ev.WorkflowName = "VAT <!channel> & co"
		ev.Subject = "<https://evil.example|Kliknij> *pilne* [tu](https://evil.example) ![i](https://evil.example/i.png)"
		ev.StepName = "<@U024BE7LH> `kod`"
		ev.Reason = "# nagłówek\n- punkt\n1. pierwszy\n> cytat <!here> ~skreślone~ | a | b |"
		e.emit(t, ev)
		if n := e.dispatch(t); n != 2 {
			t.Fatalf("dispatched %d", n)
		}
		link := "https://lifeline.example.pl/executions/" + exec

		// Slack: no raw mention or link from the data anywhere; the data shown escaped.
		got := sl.got()
		if len(got) != 1 {
			t.Fatalf("slack got %d messages", len(got))
		}
		var top struct{ Text string }
		_ = json.Unmarshal(got[0], &top)
		all := strings.Join(stringsOf(t, got[0]), "\n")
		for _, raw := range []string{"<!channel>", "<!here>", "<https://evil", "<@U024", "& co"} {
			if strings.Contains(all, raw) {
				t.Errorf("slack payload carries %q raw: %s", raw, got[0])
			}
		}
		for _, want := range []string{"&lt;!channel&gt; &amp; co", "&lt;https://evil.example|Kliknij&gt;", "&lt;@U024BE7LH&gt;", "&lt;!here&gt;"} {
			if !strings.Contains(all, want) {
				t.Errorf("slack payload lacks %q: %s", want, got[0])
			}
		}
		if !strings.HasPrefix(top.Text, "Wykonanie przepływu „VAT &lt;!channel&gt; &amp; co”") && !strings.HasPrefix(top.Text, "An execution of workflow “VAT &lt;!channel&gt; &amp; co”") ||
			!strings.HasSuffix(top.Text, " <"+link+"|Zobacz wykonanie>") && !strings.HasSuffix(top.Text, " <"+link+"|View the execution>") {
			t.Errorf("slack text: %q", top.Text)
		}

		// Teams: Markdown from the data escaped in the title, the intro and every fact.
		got = tm.got()
		if len(got) != 1 {
			t.Fatalf("teams got %d messages", len(got))
		}
		all = strings.Join(stringsOf(t, got[0]), "\n")
		for _, raw := range []string{"[tu](https", "![i]", "*pilne*", "`kod`", "\n# nagłówek", "\n- punkt", "\n1. pierwszy", "\n> cytat", "~skreślone~"} {
			if strings.Contains("\n"+all, raw) {
				t.Errorf("teams card carries %q unescaped: %s", raw, got[0])
			}
		}
		for _, want := range []string{`\[tu\]\(https://evil.example\)`, `\!\[i\]`, `\*pilne\*`, "\\`kod\\`", `\# nagłówek`, `\- punkt`, `1\. pierwszy`, `\> cytat`, `\~skreślone\~`, `\| a \|`} {
			if !strings.Contains(all, want) {
				t.Errorf("teams card lacks %q: %s", want, got[0])
			}
		}
		if !strings.Contains(all, link) {
			t.Errorf("teams card lost the link to the execution: %s", got[0])
		}
	})
}

func TestEscapeMarkdown(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Kowalski sp. z o.o. · 2026-10": "Kowalski sp. z o.o. · 2026-10",
		"a\\b":                          `a\\b`,
		"  - x\n+ y\n= z\n12. a\n3) b":  "  \\- x\n\\+ y\n\\= z\n12\\. a\n3\\) b",
		"<b>{x}</b>":                    `\<b\>\{x\}\</b\>`,
	} {
		if got := teams.EscapeMarkdown(in); got != want {
			t.Errorf("EscapeMarkdown(%q) = %q, want %q", in, got, want)
		}
	}
}
