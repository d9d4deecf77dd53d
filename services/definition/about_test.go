package definition_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"lifeline/models/apperr"
	"lifeline/services/deadline"
	"lifeline/services/definition"
	"lifeline/services/steps"
)

func aboutDef(settings string) []byte {
	return []byte(`{"name": "VAT", "settings": ` + settings + `, "steps": [{"id": "a", "type": "transform", "config": {"output": {}}}]}`)
}

func TestAboutValidates(t *testing.T) {
	reg := steps.Builtins(nil)
	tests := []struct {
		settings string
		field    string // "" when valid
	}{
		{`{"client": "{{ input.nip }}", "period": "{{ input.period }}", "amount": "{{ input.total }}", "obligation": "JPK_V7M"}`, ""},
		{`{"period": "2026-10", "obligation": "custom", "obligationRule": {"dayOfMonth": 10, "monthsAfterPeriod": 1}}`, ""},
		{`{"period": "{{ input.p }}", "obligation": "{{ input.kind }}"}`, ""},
		{`{"period": "2026-13"}`, "settings.period"},
		{`{"amount": "12,3,4"}`, "settings.amount"},
		{`{"amount": "{{ input.total }}", "currency": "złoty"}`, "settings.currency"},
		{`{"currency": "EUR"}`, "settings.currency"},
		{`{"period": "2026-10", "obligation": "VAT-7"}`, "settings.obligation"},
		{`{"obligation": "JPK_V7M"}`, "settings.period"},
		{`{"period": "2026-10", "obligation": "custom"}`, "settings.obligationRule"},
		{`{"period": "2026-10", "obligation": "ZUS", "obligationRule": {"dayOfMonth": 10, "monthsAfterPeriod": 1}}`, "settings.obligationRule"},
		{`{"period": "2026-10", "obligation": "custom", "obligationRule": {"dayOfMonth": 32, "monthsAfterPeriod": 1}}`, "settings.obligationRule.dayOfMonth"},
		{`{"client": "{{ env.HOME }}"}`, "settings.client"},
		{`{"client": "{{ steps.a.output.x }}"}`, "settings.client"},
	}
	for _, tt := range tests {
		_, err := definition.Parse(aboutDef(tt.settings), reg)
		fields := fieldsOf(err)
		if tt.field == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.settings, err)
			}
			continue
		}
		if _, ok := fields[tt.field]; !ok {
			t.Errorf("%s: want a message on %s, got %v", tt.settings, tt.field, err)
		}
	}
}

func TestAboutRenders(t *testing.T) {
	def, err := definition.Parse(aboutDef(`{"client": "{{ input.nip }}", "period": "{{ input.period }}", "amount": "{{ input.total }}",
		"currency": "{{ input.cur }}", "obligation": "{{ input.kind }}"}`), steps.Builtins(nil))
	if err != nil {
		t.Fatal(err)
	}
	in := func(s string) any {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	f, errs := def.Settings.About.Render(in(`{"nip": "5260250274", "period": "2026-10", "total": 184230.5, "kind": "JPK_V7M"}`), deadline.Settings{})
	if errs != nil {
		t.Fatal(errs)
	}
	if *f.Client != "5260250274" || *f.Period != "2026-10" || *f.AmountMinor != 18423050 || *f.Currency != "PLN" || *f.Obligation != "JPK_V7M" ||
		!f.Due.Equal(deadline.Date(2026, time.November, 25)) {
		t.Errorf("facts: %v %v %v %v %v %v", *f.Client, *f.Period, *f.AmountMinor, *f.Currency, *f.Obligation, f.Due)
	}
	// Polish decimals in a string, a ZUS day of the organization's.
	f, errs = def.Settings.About.Render(in(`{"period": "2026-10", "total": "1 234,56", "cur": "eur", "kind": "ZUS"}`), deadline.Settings{ZUSDay: 15})
	if errs != nil || *f.AmountMinor != 123456 || *f.Currency != "EUR" || !f.Due.Equal(deadline.Date(2026, time.November, 16)) || f.Client != nil {
		t.Errorf("facts: %+v %v", f, errs)
	}
	// What the input lacks is not known, not an error.
	if f, errs = def.Settings.About.Render(in(`{}`), deadline.Settings{}); errs != nil || f.Period != nil || f.AmountMinor != nil || f.Due != nil {
		t.Errorf("empty input: %+v %v", f, errs)
	}
	// What is there must be of its kind: named by the input's field.
	for input, field := range map[string]string{
		`{"total": "sto złotych"}`:                 "input.total",
		`{"period": "10/2026"}`:                    "input.period",
		`{"period": "2026-Q3", "kind": "JPK_V7M"}`: "input.period",
		`{"period": "2026-10", "kind": "VAT-7"}`:   "input.kind",
		`{"total": "12.345", "cur": "PLN"}`:        "input.total",
	} {
		_, errs := def.Settings.About.Render(in(input), deadline.Settings{})
		if _, ok := errs[field]; !ok {
			t.Errorf("%s: want a message on %s, got %v", input, field, errs)
		}
	}
}

func fieldsOf(err error) map[string]string {
	var me *apperr.Error
	if errors.As(err, &me) {
		return me.Fields
	}
	return nil
}
