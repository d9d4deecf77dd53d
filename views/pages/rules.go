package pages

// RulesVM feeds Rules: the organization's rule of who may fix what.
type RulesVM struct {
	Action, CSRF      string
	AccountantsMayFix bool
	Saved             bool
	// BulkRate is the bulk actions' rate as typed (items a second), with its bounds.
	BulkRate                 string
	BulkRateMin, BulkRateMax int
	// ZUSDay (15 or 20) and RiskWorkingDays (0–RiskDaysMax) as typed: the deadline rules.
	ZUSDay, RiskWorkingDays string
	RiskDaysMax             int
	// Error and Errors: why the form was refused (422), per field.
	Error  string
	Errors map[string]string
}
