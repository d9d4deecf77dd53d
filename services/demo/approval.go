package demo

import "time"

// The partner's approval of a large VAT return (issue 25): the VAT workflow asks the
// office's partner (an admin in the demo) to approve a return whose VAT due is above
// [ApprovalLimit] before it is filed; at or below it the step passes at once.

// ApprovalLimit is the VAT due (zł) above which the partner approves a return first.
const ApprovalLimit = "50000.00"

// ApprovalStep is the id of the VAT workflow's approval step.
const ApprovalStep = "partner_approval"

// askConfig is an ask step's configuration (the engine's "ask" step type).
type askConfig struct {
	Kind             string         `json:"kind"`
	Title            string         `json:"title"`
	Message          string         `json:"message,omitempty"`
	Assignees        []string       `json:"assignees,omitempty"`
	TimeoutMs        int            `json:"timeoutMs,omitempty"`
	TimeoutBeforeDue map[string]int `json:"timeoutBeforeDue,omitempty"`
	FourEyes         bool           `json:"fourEyes,omitempty"`
	OnlyAbove        map[string]any `json:"onlyAbove,omitempty"`
}

// partnerApproval asks the partner to approve the validated return when its VAT due is above
// the limit: four eyes (whoever started the filing or edited its input may not approve it),
// and an answer due two working days before the return is (the 25th), or within 48 hours
// when the execution has no due date. No answer in time rejects it, recorded as a timeout.
func partnerApproval() step {
	return step{
		ID:   ApprovalStep,
		Name: "Zatwierdzenie przez wspólnika",
		Type: "ask",
		Config: askConfig{
			Kind:  "approval",
			Title: "Zatwierdź JPK_V7 za {{ input.period }} – {{ input.clientName }}",
			// The VAT due is shown with the request, as an amount in the reader's format: the
			// template would give its raw number ("73345.88").
			Message:          "Plik JPK_V7M przeszedł walidację; po zatwierdzeniu zostanie wysłany do urzędu skarbowego.",
			Assignees:        []string{"role:admin"},
			TimeoutMs:        48 * 3600 * 1000,
			TimeoutBeforeDue: map[string]int{"workingDays": 2},
			FourEyes:         true,
			OnlyAbove:        map[string]any{"amount": "{{ steps.validate_jpk.output.vatDue }}", "limit": ApprovalLimit},
		},
	}
}

// Waiting returns what the demo starts on its first run (at now) for the partner to answer: a
// large VAT return (over [ApprovalLimit] due) for the month of now, due on the 25th of the
// next one, that validates and then waits for the partner's approval (until two working days
// before it is due), so that "Czeka na Ciebie" has a request from the start.
func Waiting(now time.Time) []Start {
	var mazur client
	for _, c := range clients() {
		if c.name == "Mazur Budownictwo S.A." {
			mazur = c
		}
	}
	sales, purchases := 684_250.00, 402_118.40
	return []Start{{VAT, map[string]any{"clientName": mazur.name, "clientNip": mazur.NIP(), "clientEmail": "ksiegowosc@" + mazur.domain,
		"period": now.Format("2006-01"), "salesTotal": sales, "purchaseTotal": purchases, "vatDue": vatDue(sales, purchases)}, Waits, ApprovalStep}}
}

// Waits is the fate of a [Start] that waits for a person's answer at FailedStep (an ask
// step) instead of ending.
const Waits = "waits"
