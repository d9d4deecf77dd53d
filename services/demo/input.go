package demo

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// Scenario outcome classes of an input, with their shares.
const (
	shareOK          = 0.60 // every step "ok"
	shareRecoverable = 0.25 // one step "flaky" or "rate_limited"
	// the remaining 0.15: one step "invalid", "notfound" or "down"
)

// Scenarios that recover after retries, and scenarios that end in the DLQ.
func recoverableScenarios() []string { return []string{"flaky", "rate_limited"} }
func failingScenarios() []string     { return []string{"invalid", "notfound", "down"} }

type client struct {
	name   string
	domain string
}

func clients() []client {
	return []client{
		{"Kowalski Sp. z o.o.", "kowalski.com.pl"},
		{"Nowak i Wspólnicy Sp. j.", "nowakiwspolnicy.pl"},
		{"Wiśniewska Design Anna Wiśniewska", "wisniewska-design.pl"},
		{"Piekarnia Zielińscy s.c.", "piekarnia-zielinscy.pl"},
		{"Transport Lewandowski Sp. z o.o.", "translew.pl"},
		{"Kamińska Gabinet Stomatologiczny", "stomatologia-kaminska.pl"},
		{"Mazur Budownictwo S.A.", "mazurbud.pl"},
		{"Studio Graficzne Pixel Wójcik", "pixelwojcik.pl"},
		{"Hurtownia Owoców Dąbrowski Sp. z o.o.", "owoce-dabrowski.pl"},
		{"Szymański Consulting Sp. k.", "szymanski-consulting.pl"},
		{"Apteka Pod Lipami Kozłowska", "aptekapodlipami.pl"},
		{"Jankowski Auto Serwis", "jankowski-auto.pl"},
	}
}

func accountants() []string {
	return []string{
		"anna.wisniewska@biuro-demo.pl",
		"marek.nowicki@biuro-demo.pl",
		"katarzyna.wojcik@biuro-demo.pl",
		"tomasz.kaczmarek@biuro-demo.pl",
	}
}

// Sort codes of real Polish banks, so account numbers look familiar.
func bankSortCodes() []string {
	return []string{"10201026", "10901014", "11402004", "12401037", "10501012", "11602202"}
}

func firstNames() []string {
	return []string{"Anna", "Piotr", "Katarzyna", "Tomasz", "Magdalena", "Krzysztof", "Agnieszka", "Paweł", "Joanna", "Michał", "Ewa", "Marcin"}
}

func lastNames() []string {
	return []string{"Nowak", "Kowalczyk", "Wiśniewski", "Wójcik", "Kamiński", "Lewandowski", "Zieliński", "Szymański", "Woźniak", "Dąbrowski", "Kozłowski", "Jankowski"}
}

// fullName gives a woman the feminine form of an adjectival surname
// (Wiśniewski → Wiśniewska); the first names here are female iff they end in "a".
func fullName(first, last string) string {
	if strings.HasSuffix(first, "a") && strings.HasSuffix(last, "ki") {
		last = strings.TrimSuffix(last, "i") + "a"
	}
	return first + " " + last
}

func positions() []string {
	return []string{"Księgowa", "Specjalista ds. sprzedaży", "Magazynier", "Kierowca", "Asystent biura", "Programista", "Kierownik zmiany"}
}

// Input returns a realistic random execution input for the named workflow,
// or nil if the name is not one of [Names]. It depends only on the draws
// from rnd.
func Input(workflowName string, rnd *rand.Rand) map[string]any {
	var def *definition
	for _, d := range workflows("") {
		if d.Name == workflowName {
			def = &d
			break
		}
	}
	if def == nil {
		return nil
	}

	c := pick(rnd, clients())
	in := map[string]any{
		"clientName": c.name,
		"clientNip":  nip(rnd),
		"period":     fmt.Sprintf("2026-%02d", 1+rnd.IntN(12)),
	}
	switch workflowName {
	case BankImport:
		in["account"] = iban(rnd)
		in["clientEmail"] = "ksiegowosc@" + c.domain
	case VAT:
		sales := float64(50_000_00+rnd.IntN(750_000_00)) / 100
		in["clientEmail"] = "ksiegowosc@" + c.domain
		in["salesTotal"] = sales
		in["purchaseTotal"] = math.Round(sales*(0.35+0.55*rnd.Float64())*100) / 100
	case Payroll:
		in["accountantEmail"] = pick(rnd, accountants())
		in["employees"] = employees(rnd)
	}
	sc := scenarios(rnd, httpStepIDs(*def))
	if workflowName == BankImport && sc["import_statement"] == "ok" {
		sc["import_statement"] = "outage" // the bank's recurring outage (see bankImport)
	}
	in["scenario"] = sc
	return in
}

// scenarios gives every step "ok", then possibly one step a failing scenario.
func scenarios(rnd *rand.Rand, stepIDs []string) map[string]any {
	out := make(map[string]any, len(stepIDs))
	for _, id := range stepIDs {
		out[id] = "ok"
	}
	var choice string
	switch p := rnd.Float64(); {
	case p < shareOK:
		return out
	case p < shareOK+shareRecoverable:
		choice = pick(rnd, recoverableScenarios())
	default:
		choice = pick(rnd, failingScenarios())
	}
	if len(stepIDs) > 0 {
		out[pick(rnd, stepIDs)] = choice
	}
	return out
}

func httpStepIDs(d definition) []string {
	var ids []string
	for _, s := range d.Steps {
		if s.Type == "http" && !s.Handler { // a handler runs only when a failure is handed to it
			ids = append(ids, s.ID)
		}
	}
	return ids
}

func employees(rnd *rand.Rand) []any {
	n := 3 + rnd.IntN(10)
	out := make([]any, n)
	for i := range out {
		gross := float64(4806_00+rnd.IntN(9000_00)) / 100 // from the 2026 minimum wage (4806 PLN) up
		out[i] = map[string]any{
			"name":        fullName(pick(rnd, firstNames()), pick(rnd, lastNames())),
			"position":    pick(rnd, positions()),
			"grossSalary": gross,
		}
	}
	return out
}

// nip returns a 10-digit NIP with a valid check digit.
func nip(rnd *rand.Rand) string {
	weights := [9]int{6, 5, 7, 2, 3, 4, 5, 6, 7}
	for {
		var d [10]int
		d[0] = 1 + rnd.IntN(9) // tax office codes do not start with 0
		for i := 1; i < 9; i++ {
			d[i] = rnd.IntN(10)
		}
		sum := 0
		for i, w := range weights {
			sum += d[i] * w
		}
		if sum%11 == 10 {
			continue // no valid check digit; draw again
		}
		d[9] = sum % 11
		var b strings.Builder
		for _, x := range d {
			b.WriteByte(byte('0' + x))
		}
		return b.String()
	}
}

// iban returns a Polish IBAN (electronic format, no spaces) with valid check digits.
func iban(rnd *rand.Rand) string {
	var b strings.Builder
	b.WriteString(pick(rnd, bankSortCodes()))
	for range 16 {
		b.WriteByte(byte('0' + rnd.IntN(10)))
	}
	bban := b.String()
	// ISO 13616: move "PL00" to the end, letters as numbers (P=25, L=21), mod 97.
	mod := 0
	for _, c := range bban + "252100" {
		mod = (mod*10 + int(c-'0')) % 97
	}
	return fmt.Sprintf("PL%02d%s", 98-mod, bban)
}

func pick[T any](rnd *rand.Rand, xs []T) T {
	return xs[rnd.IntN(len(xs))]
}
