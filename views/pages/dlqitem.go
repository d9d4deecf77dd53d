package pages

// DLQItemVM feeds DLQItem (one dead letter, read-only).
type DLQItemVM struct {
	Row               DLQRow
	ErrorCode         string
	StackTrace        string
	OriginalInputJSON string
	StepStatesJSON    string
	ManualRetries     int
	ListURL           string // added: the dead-letter list, for the breadcrumb; empty = plain text
}
