package pages

// EscalationVM feeds Escalation: the organization's escalation policy as a form, one row
// per level.
type EscalationVM struct {
	Action, CSRF string
	Saved        bool
	// Rows are the levels, then one empty row to add a level (without JavaScript).
	Rows []EscalationRow
	// Template is the empty row "Add a level" copies (its Index is "__i__").
	Template EscalationRow
	// Units are the wait's units (minutes, hours, days).
	Units []Option
	// Error: why the form was refused (422); each row holds its own field messages.
	Error string
}

// EscalationRow is one level of the form.
type EscalationRow struct {
	// Index names the row's fields (levels[Index].after…).
	Index string
	// Number is the level's number as shown ("Poziom 2").
	Number string
	// After and Unit are the wait as typed.
	After, Unit string
	// To are the roles and members the row may name, each checked when named.
	To []EscalationChoice
	// AfterError and ToError are the row's field messages.
	AfterError, ToError string
}

// EscalationChoice is a role or member a level may name.
type EscalationChoice struct {
	Value, Label string
	Checked      bool
}
