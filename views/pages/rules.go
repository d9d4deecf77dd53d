package pages

// RulesVM feeds Rules: the organization's rule of who may fix what.
type RulesVM struct {
	Action, CSRF      string
	AccountantsMayFix bool
	Saved             bool
	// BulkRate is the bulk actions' rate as typed (items a second), with its bounds.
	BulkRate                 string
	BulkRateMin, BulkRateMax int
	// Error and Errors: why the form was refused (422), per field.
	Error  string
	Errors map[string]string
}
