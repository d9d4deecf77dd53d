package pages

// PoisonFlag is an input value of a DLQ item (or of a group's items) that breaks runs, or
// that an admin quarantined (issue 22).
type PoisonFlag struct {
	// Kind is the value's kind in the reader's language ("numer faktury"); Value the value.
	Kind, Value string
	// Text says how it failed ("Ten dokument nie przeszedł 3 razy w 2 przepływach."); ""
	// for a held value that did not fail that often.
	Text string
	// SearchURL is the DLQ item list filtered by the value.
	SearchURL string
	// Held: the value is quarantined; HeldText says since when, by whom and why.
	Held     bool
	HeldText string
	// HoldURL (admins, not held) posts the quarantine form; ReleaseURL (admins, held)
	// releases it. BackURL is where either returns.
	HoldURL, ReleaseURL, BackURL, CSRF string
	// AdminOnly: the reader may not act; the flag says an admin can.
	AdminOnly bool
}

// HeldVM feeds Held (the admins' list of quarantined values).
type HeldVM struct {
	Rows []HeldRow
	CSRF string
	// Done says what was just done ("released"), if anything.
	Done string
}

// HeldRow is one quarantined value.
type HeldRow struct {
	ID, Kind, Value, Note, By string
	At, AtISO                 string
	SearchURL, ReleaseURL     string
}
