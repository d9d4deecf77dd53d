package demo

// Start is an execution to start: a workflow of [Names] and its input.
type Start struct {
	Workflow string
	Input    map[string]any
}

// Morning returns what the demo starts when it is first seeded, so that a newcomer sees at
// once an execution that succeeds and failures of the kinds an office meets, each with its
// true reason and each curable by the action that fits it:
//   - a bank import for Kowalski that goes through;
//   - a bank import for Nowak i Wspólnicy whose NIP lost a digit: the bank refuses it and it
//     waits in the DLQ until someone edits the NIP and retries;
//   - a bank import for Piekarnia Zielińscy whose client's e-mail address lost its "@": the
//     report fails at the fourth step, the three steps before it are rolled back, and it waits
//     in the DLQ until someone corrects the address and retries the whole workflow;
//   - a VAT filing for Apteka Pod Lipami whose NIP lost a digit: the tax office refuses it and
//     its on-failure handler sends it back to the preparer as a task (the execution ends
//     partly done).
func Morning() []Start {
	byName := map[string]client{}
	for _, c := range clients() {
		byName[c.name] = c
	}
	kowalski, nowak := byName["Kowalski Sp. z o.o."], byName["Nowak i Wspólnicy Sp. j."]
	piekarnia, apteka := byName["Piekarnia Zielińscy s.c."], byName["Apteka Pod Lipami Kozłowska"]
	bank := func(c client, nip, email string) Start {
		return Start{BankImport, map[string]any{"clientName": c.name, "clientNip": nip, "clientEmail": email,
			"account": c.Account(), "period": "2026-10"}}
	}
	return []Start{
		bank(kowalski, kowalski.NIP(), "ksiegowosc@"+kowalski.domain),
		bank(nowak, dropDigit(nowak.NIP(), 4), "ksiegowosc@"+nowak.domain),
		bank(piekarnia, piekarnia.NIP(), "ksiegowosc."+piekarnia.domain),
		{VAT, map[string]any{"clientName": apteka.name, "clientNip": dropDigit(apteka.NIP(), 7), "clientEmail": "ksiegowosc@" + apteka.domain,
			"period": "2026-10", "salesTotal": 48210.50, "purchaseTotal": 19877.12}},
	}
}

// dropDigit returns nip without its i-th digit.
func dropDigit(nip string, i int) string { return nip[:i] + nip[i+1:] }
