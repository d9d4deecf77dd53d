package demo

// ClosedPeriod is a period the demo office has closed (issue 23): September 2026 for one
// client, reported and filed. Its late bank statement in the morning ([Morning], fate
// [PeriodClosed]) is refused at the ledger posting without being sent: the DLQ item says
// which period, who closed it and when, and offers what an office does instead.
type ClosedPeriod struct {
	Period string
	// Client is the client's key as its executions carry it: its name (settings.client).
	Client string
	Note   string
}

// lateClient is the client whose September is closed and whose September statement comes
// late.
const lateClient = "Kowalski Sp. z o.o."

// ClosedPeriods returns the periods the demo office has closed when it is first seeded.
func ClosedPeriods() []ClosedPeriod {
	for _, c := range clients() {
		if c.name == lateClient {
			return []ClosedPeriod{{Period: "2026-09", Client: c.name,
				Note: "Wrzesień rozliczony: JPK_V7M wysłany 24.10, księgi za wrzesień zamknięte."}}
		}
	}
	return nil
}
