package fingerprint

import (
	"fmt"
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"nip quoted (sandbox)", "NIP „526104082” ma 9 cyfr, a powinien mieć 10", "NIP „…” ma … cyfr, a powinien mieć …"},
		{"nip bare", "NIP 5260250274 must have 10 digits", "NIP … must have … digits"},
		{"nip dashes", "NIP 526-025-02-74 jest nieprawidłowy", "NIP … jest nieprawidłowy"},
		{"nip PL prefix", "VAT id PL5260250274 unknown in VIES", "VAT id … unknown in VIES"},
		{"regon", "REGON 012345678 nie istnieje", "REGON … nie istnieje"},
		{"regon 14", "REGON 12345678512347 nie istnieje", "REGON … nie istnieje"},
		{"pesel", "PESEL 44051401359: zła suma kontrolna", "PESEL …: zła suma kontrolna"},
		{"iban", "Rachunek PL61 1090 1014 0000 0712 1981 2874 jest zamknięty", "Rachunek … jest zamknięty"},
		{"iban compact", "account PL61109010140000071219812874 closed", "account … closed"},
		{"nrb", "NRB 61 1090 1014 0000 0712 1981 2874 odrzucony", "NRB … odrzucony"},
		{"ksef", "Faktura 5265877635-20250626-010080DD2B5E-26 odrzucona przez KSeF", "Faktura … odrzucona przez KSeF"},
		{"invoice", "Faktura FV/2026/10/123 już istnieje", "Faktura … już istnieje"},
		{"invoice other", "Invoice FV/2026/11/7 already booked", "Invoice … already booked"},
		{"amount pl", "Kwota 1 234,56 zł przekracza limit", "Kwota … zł przekracza limit"},
		{"amount nbsp", "Kwota 1\u00a0234,56 zł przekracza limit", "Kwota … zł przekracza limit"},
		{"amount small", "Saldo -12,50 PLN", "Saldo … PLN"},
		{"amount dot", "total 99.99 EUR does not match", "total … EUR does not match"},
		{"date pl", "Termin 25.11.2026 minął", "Termin … minął"},
		{"date iso", "deadline 2026-11-25 passed", "deadline … passed"},
		{"datetime iso", "token expired at 2026-11-25T07:26:05Z", "token expired at …"},
		{"datetime offset", "token expired at 2026-11-25T07:26:05.123+01:00, renew it", "token expired at …, renew it"},
		{"period month", "Okres 2026-10 jest zamknięty", "Okres … jest zamknięty"},
		{"period quarter", "Okres 2026-Q3 jest zamknięty", "Okres … jest zamknięty"},
		{"uuid", "execution 0f8fad5b-d9cb-469f-a165-70867728950e not found", "execution … not found"},
		{"email", "Adres „jan.kowalski@example.com” nie jest adresem e-mail", "Adres „…” nie jest adresem e-mail"},
		{"email bare", "mailbox anna+biuro@firma.com.pl is full", "mailbox … is full"},
		{"url ids", "GET https://api.bank.example/v1/accounts/12345/statements?from=2026-10-01 returned 503",
			"GET https://api.bank.example/v1/accounts/…/statements?… returned …"},
		{"url uuid", "POST https://ksef.example/api/v2/invoices/0f8fad5b-d9cb-469f-a165-70867728950e: timeout",
			"POST https://ksef.example/api/v2/invoices/…: timeout"},
		{"url sentence end", "see https://status.example/incidents/8812.", "see https://status.example/incidents/…."},
		{"hex", "request 0x1f2e3d failed, trace 4bf92f3577b34da6 lost", "request … failed, trace … lost"},
		{"hex word kept", "facade deadbeef", "facade deadbeef"},
		{"mixed id", "job exec_01HXYZ42 timed out", "job … timed out"},
		{"version kept", "OAuth2 token for S3 v2 expired", "OAuth2 token for S3 v2 expired"},
		{"quoted plain", `field "clientNip" has value "abc"`, `field "…" has value "…"`},
		{"quoted single", "unknown client 'Kowalski sp. z o.o.'", "unknown client '…'"},
		{"time", "bank closed at 18:30, retry later", "bank closed at …, retry later"},
		{"range joined", "expected 10-12 digits", "expected … digits"},
		{"whitespace", "  too   many\n spaces ", "too many spaces"},
		{"no variables", "service unavailable (outage)", "service unavailable (outage)"},
		{"http status kept", "clientNip: NIP „5261040827” ma 10 cyfr (400 Bad Request)", "clientNip: NIP „…” ma … cyfr (400 Bad Request)"},
		{"http status alone", "503 Service Unavailable", "… Service Unavailable"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Normalize(tt.in); got != tt.want {
				t.Errorf("Normalize(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestNormalizeBounded(t *testing.T) {
	got := Normalize(strings.Repeat("słowo ", 200))
	if n := len([]rune(got)); n != MaxTemplateRunes {
		t.Fatalf("template of %d runes, want %d", n, MaxTemplateRunes)
	}
	if !strings.HasSuffix(got, Placeholder) {
		t.Errorf("a cut template ends with %q: %q", Placeholder, got)
	}
}

// The sandbox office's NIP reasons (services/sandbox/office.go) for different NIPs of the
// same problem are one fingerprint; different problems, steps, types are not.
func TestOfDemoReasons(t *testing.T) {
	base := Failure{WorkflowID: "wf-vat", StepID: "send", ErrorType: "validation", ErrorCode: "HTTP_400"}
	with := func(reason string) Failure { f := base; f.Reason = reason; return f }
	short := func(nip string) string {
		return fmt.Sprintf("NIP „%s” ma %d cyfr, a powinien mieć 10", nip, len(nip))
	}
	a, b := Of(with(short("526104082"))), Of(with(short("701000213")))
	if a.Hash != b.Hash {
		t.Errorf("two NIPs of 9 digits: %q and %q differ", a.Template, b.Template)
	}
	if a.Version != Version || a.Template != "NIP „…” ma … cyfr, a powinien mieć …" {
		t.Errorf("print %+v", a)
	}
	c1 := Of(with("NIP „5261040827”: cyfra kontrolna się nie zgadza (literówka w numerze?)"))
	c2 := Of(with("NIP „7010002136”: cyfra kontrolna się nie zgadza (literówka w numerze?)"))
	if c1.Hash != c2.Hash {
		t.Errorf("check digit: %q and %q differ", c1.Template, c2.Template)
	}
	if c1.Hash == a.Hash {
		t.Error("a wrong check digit and a wrong length are one fingerprint")
	}
	e1 := Of(with("Adres „jan@biuro.pl” nie jest adresem e-mail"))
	e2 := Of(with("Adres „kontakt(at)firma.pl” nie jest adresem e-mail"))
	if e1.Hash != e2.Hash {
		t.Errorf("e-mail: %q and %q differ", e1.Template, e2.Template)
	}
	other := func(mod func(*Failure)) string {
		f := with(short("526104082"))
		mod(&f)
		return Of(f).Hash
	}
	for name, mod := range map[string]func(*Failure){
		"workflow": func(f *Failure) { f.WorkflowID = "wf-other" },
		"step":     func(f *Failure) { f.StepID = "fetch" },
		"type":     func(f *Failure) { f.ErrorType = "permanent" },
		"code":     func(f *Failure) { f.ErrorCode = "HTTP_422" },
	} {
		if other(mod) == a.Hash {
			t.Errorf("a different %s gives the same fingerprint", name)
		}
	}
}

// The version is part of the fingerprint: the same failure under other rules is another
// fingerprint, so old groups keep their items and new failures go to new groups.
func TestVersionInHash(t *testing.T) {
	f := Failure{WorkflowID: "w", StepID: "s", ErrorType: "t", Reason: "NIP 5260250274"}
	p := Of(f)
	if p.Hash != hash("w", "s", "t", "", "NIP …", "1") {
		t.Fatal("the hash is not of the fields, the template and the version")
	}
	if p.Hash == hash("w", "s", "t", "", "NIP …", "2") {
		t.Error("the version does not change the hash")
	}
	// No two different field lists hash alike (length-prefixed).
	if hash("ab", "c") == hash("a", "bc") {
		t.Error("field boundaries are not part of the hash")
	}
}

// BenchmarkOf measures a fingerprint (issue 22: under 50 µs). One op fingerprints a batch of
// 2,000 failures of five kinds, so `make bench`'s single op (-benchtime 1x) is a steady
// figure: µs/fingerprint.
func BenchmarkOf(b *testing.B) {
	reasons := []string{
		"NIP „526104082” ma 9 cyfr, a powinien mieć 10",
		"GET https://api.bank.example/v1/accounts/12345/statements?from=2026-10-01 returned 503 Service Unavailable",
		"Kwota 1 234,56 zł na fakturze FV/2026/10/123 nie zgadza się z wyciągiem z 25.11.2026",
		"token expired at 2026-11-25T07:26:05Z for anna@biuro.pl",
		"service unavailable (outage)",
	}
	const batch = 2000
	Of(Failure{Reason: reasons[0]}) // the patterns compiled, as in a running process
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for i := range batch {
			Of(Failure{WorkflowID: "wf", StepID: "step", ErrorType: "transient", ErrorCode: "HTTP_503", Reason: reasons[i%len(reasons)]})
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*batch), "us/fingerprint")
}
