package demo

import "math/rand/v2"

// Start is an execution to start: a workflow of [Names], its input, and how it ends.
type Start struct {
	Workflow string
	Input    map[string]any
	// Fate is how it ends when started on a fresh demo: "succeeds", "dead-letter" (at
	// FailedStep), "handled" (its failure at FailedStep handed to an on-failure handler) or
	// "period-closed" (dead-lettered at FailedStep, which posts to a period the office has
	// closed: the step is not sent).
	Fate       string
	FailedStep string
}

// Fates of a Start.
const (
	Succeeds   = "succeeds"
	DeadLetter = "dead-letter"
	Handled    = "handled"
	// PeriodClosed: the step at FailedStep would post into a period of [ClosedPeriods]; it
	// is not sent, and the execution waits in the DLQ (validation / period_closed).
	PeriodClosed = "period-closed"
)

// Morning returns what the demo starts when it is first seeded: the office's night, so that
// whoever opens it first finds what an accountant finds at 8 a.m., failures of the kinds an
// office meets, each with its true reason and each curable by the action that fits it:
//   - a NIP typed wrong (a digit lost, two swapped) in bank imports and payroll exports: the
//     service refuses it and it waits in the DLQ until someone corrects the NIP and retries;
//   - a client's e-mail address that lost its "@": the report fails at the fourth step, the
//     three steps before it are rolled back, and it waits until someone corrects the address
//     and retries the whole workflow;
//   - October statements holding an invoice the client has not yet sent to KSeF: matching is
//     refused and the import rolled back, until the invoice arrives (four minutes later);
//     then retrying the whole workflow goes through;
//   - payroll exports of clients whose quota at the bank is used up: refused with
//     Retry-After until three minutes after the first try; then a retry goes through;
//   - KSeF downloads of purchase invoices, refused because the office's KSeF token expired at
//     twenty to eight (401): they wait until an admin uploads the new token once (Settings →
//     Credentials) and someone retries them;
//   - a VAT filing whose NIP lost a digit: the tax office refuses it and its on-failure
//     handler sends it back to the preparer as a task (the execution ends partly done);
//   - a late September statement of a client whose September the office has already closed
//     ([ClosedPeriods]): the import and matching go through, the posting into the closed
//     period is not sent, the import is rolled back, and the item offers moving it to an
//     open period, asking an admin to reopen September, or closing it with a note;
//   - and a bank import that goes through.
//
// Which statements hold a late invoice and which clients are over their quota is the
// sandbox's weather (package sandbox, office mode); TestMorningFailsForItsTrueReasons checks
// every fate against it.
func Morning() []Start {
	byName := map[string]client{}
	for _, c := range clients() {
		byName[c.name] = c
	}
	bank := func(name string, nip func(string) string, email func(client) string, fate, step string) Start {
		c := byName[name]
		return Start{BankImport, map[string]any{"clientName": c.name, "clientNip": nip(c.NIP()), "clientEmail": email(c),
			"account": c.Account(), "period": "2026-10"}, fate, step}
	}
	payroll := func(name string, nip func(string) string, fate, step string) Start {
		c := byName[name]
		in := map[string]any{"clientName": c.name, "clientNip": nip(c.NIP()), "period": "2026-10",
			"accountantEmail": accountants()[len(name)%len(accountants())], "employees": staff(name)}
		in["payrollTotal"] = payrollTotal(in["employees"].([]any))
		return Start{Payroll, in, fate, step}
	}
	right := func(nip string) string { return nip }
	lose := func(i int) func(string) string { return func(nip string) string { return nip[:i] + nip[i+1:] } }
	swap := func(i int) func(string) string {
		return func(nip string) string { b := []byte(nip); b[i], b[i+1] = b[i+1], b[i]; return string(b) }
	}
	office := func(c client) string { return "ksiegowosc@" + c.domain }
	noAt := func(c client) string { return "ksiegowosc." + c.domain }
	apteka := byName["Apteka Pod Lipami Kozłowska"]
	ksef := func(name string) Start {
		c := byName[name]
		return Start{KSeF, map[string]any{"clientName": c.name, "clientNip": c.NIP(), "period": "2026-10"}, DeadLetter, "fetch_invoices"}
	}
	late := bank(lateClient, right, office, PeriodClosed, "post_ledger")
	late.Input["period"] = "2026-09"
	return []Start{
		bank("Kowalski Sp. z o.o.", right, office, Succeeds, ""),
		late,
		bank("Nowak i Wspólnicy Sp. j.", lose(4), office, DeadLetter, "import_statement"),
		bank("Piekarnia Zielińscy s.c.", right, noAt, DeadLetter, "send_report"),
		bank("Studio Graficzne Pixel Wójcik", right, office, DeadLetter, "match_invoices"),
		bank("Transport Lewandowski Sp. z o.o.", right, office, DeadLetter, "match_invoices"),
		bank("Kamińska Gabinet Stomatologiczny", right, office, DeadLetter, "match_invoices"),
		bank("Hurtownia Owoców Dąbrowski Sp. z o.o.", swap(5), office, DeadLetter, "import_statement"),
		payroll("Szymański Consulting Sp. k.", right, DeadLetter, "export_payroll"),
		payroll("Transport Lewandowski Sp. z o.o.", right, DeadLetter, "export_payroll"),
		payroll("Kamińska Gabinet Stomatologiczny", right, DeadLetter, "export_payroll"),
		payroll("Mazur Budownictwo S.A.", swap(2), DeadLetter, "export_payroll"),
		payroll("Jankowski Auto Serwis", lose(7), DeadLetter, "export_payroll"),
		ksef("Kowalski Sp. z o.o."),
		ksef("Wiśniewska Design Anna Wiśniewska"),
		ksef("Mazur Budownictwo S.A."),
		{VAT, map[string]any{"clientName": apteka.name, "clientNip": lose(7)(apteka.NIP()), "clientEmail": office(apteka),
			"period": "2026-10", "salesTotal": 48210.50, "purchaseTotal": 19877.12, "vatDue": vatDue(48210.50, 19877.12)}, Handled, "validate_jpk"},
	}
}

// staff is a client's payroll: a few employees, always the same for one client.
func staff(name string) []any {
	return employees(rand.New(rand.NewPCG(seedOf(name), 3)))
}
