package definition

import (
	"fmt"
	"strings"
	"time"

	"lifeline/services/deadline"
	"lifeline/services/money"
	"lifeline/services/tmpl"
)

// About says what a workflow's executions are about, for an accounting office: the client,
// the period, the money and the filing obligation (issue 23). Each is a template over the
// input, like the subject, rendered when an execution starts and stored with it; a literal
// is a template without placeholders. An empty rendering means "not known" for that
// execution, never an error; a period, amount, currency or obligation that renders to
// something else than its kind is refused at start (a 422 naming the field).
type About struct {
	// Client is the client's key, e.g. its NIP ("{{ input.clientNip }}").
	Client string `json:"client,omitempty"`
	// Period renders to YYYY-MM, YYYY-Qn or YYYY.
	Period string `json:"period,omitempty"`
	// Amount renders to a decimal ("184230.50", "184 230,50"); Currency to a three-letter
	// code (default PLN).
	Amount   string `json:"amount,omitempty"`
	Currency string `json:"currency,omitempty"`
	// Obligation renders to one of deadline.Obligations; "custom" takes ObligationRule.
	Obligation     string          `json:"obligation,omitempty"`
	ObligationRule *ObligationRule `json:"obligationRule,omitempty"`
}

// ObligationRule is a custom obligation's rule: DayOfMonth (1-31; past a month's end, its
// last day) of the MonthsAfterPeriod-th month after the period's last month (0-24).
type ObligationRule struct {
	DayOfMonth        int `json:"dayOfMonth"`
	MonthsAfterPeriod int `json:"monthsAfterPeriod"`
}

// MaxAboutTemplate bounds each template of About.
const MaxAboutTemplate = 300

// validateAbout adds the field messages of a's templates and literals to errs.
func (a *About) validateAbout(errs map[string]string) {
	fields := []struct{ name, v string }{
		{"client", a.Client}, {"period", a.Period}, {"amount", a.Amount}, {"currency", a.Currency}, {"obligation", a.Obligation},
	}
	for _, f := range fields {
		p := "settings." + f.name
		if f.v == "" {
			continue
		}
		if len(f.v) > MaxAboutTemplate {
			errs[p] = fmt.Sprintf("must be at most %d characters", MaxAboutTemplate)
			continue
		}
		if _, terrs := tmpl.Check(f.v, "input"); len(terrs) > 0 {
			for _, v := range terrs {
				errs[p] = v + " (it can read only input)"
			}
			continue
		}
		if strings.Contains(f.v, "{{") {
			continue // checked when it renders, at start
		}
		if msg := literalProblem(f.name, f.v); msg != "" {
			errs[p] = msg
		}
	}
	custom := a.Obligation == deadline.Custom
	switch {
	case a.ObligationRule != nil && a.Obligation != "" && !custom && !strings.Contains(a.Obligation, "{{"):
		errs["settings.obligationRule"] = `applies only to the obligation "custom"`
	case custom && a.ObligationRule == nil:
		errs["settings.obligationRule"] = "is required for a custom obligation: dayOfMonth and monthsAfterPeriod"
	case a.ObligationRule != nil:
		if r := a.ObligationRule; r.DayOfMonth < 1 || r.DayOfMonth > 31 {
			errs["settings.obligationRule.dayOfMonth"] = "must be 1-31"
		} else if r.MonthsAfterPeriod < 0 || r.MonthsAfterPeriod > 24 {
			errs["settings.obligationRule.monthsAfterPeriod"] = "must be 0-24"
		}
	}
	if a.Amount == "" && a.Currency != "" {
		errs["settings.currency"] = "needs settings.amount"
	}
	if a.Obligation != "" && a.Period == "" {
		errs["settings.period"] = "is required with settings.obligation: a due date is counted from the period"
	}
}

// literalProblem says why a rendered (or literal) value of field is not of its kind; "" when
// it is.
func literalProblem(field, v string) string {
	switch field {
	case "period":
		if _, err := deadline.ParsePeriod(v); err != nil {
			return err.Error()
		}
	case "amount":
		if _, err := money.Parse(v, money.DefaultCurrency); err != nil {
			return err.Error()
		}
	case "currency":
		if _, err := money.ParseCurrency(v); err != nil {
			return err.Error()
		}
	case "obligation":
		for _, o := range deadline.Obligations {
			if v == o {
				return ""
			}
		}
		return fmt.Sprintf("%q is not an obligation; known: %s", v, strings.Join(deadline.Obligations, ", "))
	}
	return ""
}

// Facts are what an execution is about, rendered from About over its input: each nil when
// the workflow does not say or the input lacks it.
type Facts struct {
	Client, Period, Obligation *string
	// AmountMinor is in minor units of Currency (money.Amount).
	AmountMinor *int64
	Currency    *string
	// Due is the obligation's due date for the period (a civil date), for the organization's
	// settings.
	Due *time.Time
}

// Render renders a over input and checks each value; field messages (keyed by the input's
// path where the template is one placeholder of it, input.amount, else by the setting,
// "settings.amount") when a value is not of its kind.
func (a *About) Render(in any, s deadline.Settings) (Facts, map[string]string) {
	var f Facts
	errs := map[string]string{}
	env := map[string]any{"input": in}
	render := func(field, t string) *string {
		if t == "" || in == nil {
			return nil
		}
		v, err := tmpl.RenderString(t, env)
		v = strings.TrimSpace(v)
		if err != nil || v == "" || v == "<nil>" {
			return nil
		}
		if msg := literalProblem(field, v); msg != "" {
			errs[fieldOf(field, t)] = msg
			return nil
		}
		return &v
	}
	f.Client = render("client", a.Client)
	if f.Client != nil && len(*f.Client) > 200 {
		errs[fieldOf("client", a.Client)] = "must be at most 200 characters"
	}
	f.Period = render("period", a.Period)
	f.Obligation = render("obligation", a.Obligation)
	cur := money.DefaultCurrency
	if c := render("currency", a.Currency); c != nil {
		cur, _ = money.ParseCurrency(*c)
	}
	if amt := render("amount", a.Amount); amt != nil {
		n, err := money.Parse(*amt, cur)
		if err != nil {
			errs[fieldOf("amount", a.Amount)] = err.Error()
		} else {
			f.AmountMinor, f.Currency = &n, &cur
		}
	}
	if f.Obligation != nil && f.Period != nil {
		o := deadline.Obligation{Name: *f.Obligation}
		if r := a.ObligationRule; r != nil {
			o.DayOfMonth, o.MonthsAfterPeriod = r.DayOfMonth, r.MonthsAfterPeriod
		}
		p, _ := deadline.ParsePeriod(*f.Period)
		due, err := deadline.Due(o, p, s)
		if err != nil {
			errs[fieldOf("period", a.Period)] = err.Error()
		} else {
			f.Due = &due
		}
	}
	if len(errs) > 0 {
		return Facts{}, errs
	}
	return f, nil
}

// fieldOf is the field a bad value is reported under: the input's path when the template is
// exactly one placeholder of it ({{ input.amount }} → input.amount), else the setting.
func fieldOf(field, t string) string {
	s := strings.TrimSpace(t)
	if strings.HasPrefix(s, "{{") && strings.HasSuffix(s, "}}") && strings.Count(s, "{{") == 1 {
		inner := strings.TrimSpace(s[2 : len(s)-2])
		if strings.HasPrefix(inner, "input.") && strings.IndexFunc(inner, func(r rune) bool {
			return !(r == '.' || r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
		}) < 0 {
			return inner
		}
	}
	return "settings." + field
}
