package pages

// DeadlineAlert is one line of the deadlines banner (issue 23): an obligation, period and
// due date whose work is overdue, due today or at risk.
type DeadlineAlert struct {
	// Text is the line ("JPK_V7M za 2026-10: 3 klientów zagrożonych, termin śr. 25 lis,
	// 0 dni roboczych"); URL the list of its items (filtered by obligation and period).
	Text, URL string
	// Urgency is overdue, due_today or at_risk (the line's style).
	Urgency string
	// Hint, for admins on an overdue line, says how to correct it (czynny żal).
	Hint string
}
