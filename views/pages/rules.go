package pages

// RulesVM feeds Rules: the organization's rule of who may fix what.
type RulesVM struct {
	Action, CSRF      string
	AccountantsMayFix bool
	Saved             bool
}
