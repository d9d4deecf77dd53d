package demo

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"lifeline/services/checkdigit"
)

// ShareTypo is the share of inputs whose NIP was typed wrong: a digit left out, or two
// neighbouring digits swapped. The services refuse it, saying so; editing the input cures it.
// Every other failure of the demo comes from the sandbox's weather (the bank's outage, the
// tax gateway's maintenance break, an invoice not yet in KSeF, a used-up quota), not from
// the input.
const ShareTypo = 0.10

type client struct {
	name   string
	domain string
}

// NIP is a client's NIP: always the same for one client, with a valid check digit.
func (c client) NIP() string { return nip(rand.New(rand.NewPCG(seedOf(c.name), 1))) }

// Account is a client's bank account: always the same for one client.
func (c client) Account() string { return iban(rand.New(rand.NewPCG(seedOf(c.name), 2))) }

func seedOf(s string) uint64 {
	h := uint64(14695981039346656037) // FNV-1a
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
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
	clientNip := c.NIP()
	if rnd.Float64() < ShareTypo {
		clientNip = typo(rnd, clientNip)
	}
	in := map[string]any{
		"clientName": c.name,
		"clientNip":  clientNip,
		// Mostly October, whose VAT is due on 25 November; some September late work and
		// November's first runs.
		"period": recentPeriods[rnd.IntN(len(recentPeriods))],
	}
	switch workflowName {
	case BankImport:
		in["account"] = c.Account()
		in["clientEmail"] = "ksiegowosc@" + c.domain
	case VAT:
		sales := float64(50_000_00+rnd.IntN(750_000_00)) / 100
		in["clientEmail"] = "ksiegowosc@" + c.domain
		in["salesTotal"] = sales
		in["purchaseTotal"] = math.Round(sales*(0.35+0.55*rnd.Float64())*100) / 100
		in["vatDue"] = vatDue(sales, in["purchaseTotal"].(float64))
	case Payroll:
		in["accountantEmail"] = pick(rnd, accountants())
		in["employees"] = employees(rnd)
		in["payrollTotal"] = payrollTotal(in["employees"].([]any))
	case KSeF: // the client and the period are all KSeF needs
	}
	return in
}

// recentPeriods are the demo's periods, weighted towards the month being filed now.
var recentPeriods = []string{"2026-10", "2026-10", "2026-10", "2026-09", "2026-11"}

// vatDue is the VAT to pay on sales and purchases at 23 %, in whole grosze.
func vatDue(sales, purchases float64) float64 {
	return math.Round((sales-purchases)*23) / 100
}

// payrollTotal sums the employees' gross salaries, in whole grosze.
func payrollTotal(employees []any) float64 {
	var grosze int64
	for _, e := range employees {
		grosze += int64(math.Round(e.(map[string]any)["grossSalary"].(float64) * 100))
	}
	return float64(grosze) / 100
}

// typo returns nip typed wrong, as people do: a digit left out, or two neighbouring digits
// swapped (when they differ, so the check digit no longer matches).
func typo(rnd *rand.Rand, nip string) string {
	if rnd.IntN(2) == 0 {
		i := rnd.IntN(len(nip))
		return nip[:i] + nip[i+1:]
	}
	for {
		i := rnd.IntN(len(nip) - 1)
		if nip[i] != nip[i+1] {
			b := []byte(nip)
			b[i], b[i+1] = b[i+1], b[i]
			if checkdigit.NIP(string(b)) {
				continue // this swap kept the check digit right: a different one
			}
			return string(b)
		}
	}
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
