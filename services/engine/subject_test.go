package engine

import (
	"encoding/json"
	"testing"

	"lifeline/services/definition"
	"lifeline/services/redact"
)

// TestSubject: an execution's subject is its settings.subject template over the input; when
// the input lacks the fields, so that only the template's separators are left, there is no
// subject (the pages then show the short id).
func TestSubject(t *testing.T) {
	e := &starts{&core{secrets: &secrets{redactor: redact.New(nil)}}}
	def := &definition.Definition{}
	def.Settings.Subject = "{{ input.clientName }} · {{ input.period }}"
	for _, c := range []struct{ input, want string }{
		{`{"clientName": "Kwiaciarnia Róża", "period": "2026-10"}`, "Kwiaciarnia Róża · 2026-10"},
		{`{"clientName": "Kwiaciarnia Róża"}`, "Kwiaciarnia Róża ·"},
		{`{"period": "2026-10"}`, "· 2026-10"},
		{`{"bogus": 1}`, ""},
		{`{"clientName": "  ", "period": "-"}`, ""},
	} {
		got := ""
		var in any
		if err := json.Unmarshal([]byte(c.input), &in); err != nil {
			t.Fatal(err)
		}
		if s := e.subject(def, in, e.masker(def, in)); s != nil {
			got = *s
		}
		if got != c.want {
			t.Errorf("subject of %s = %q, want %q", c.input, got, c.want)
		}
	}
}
