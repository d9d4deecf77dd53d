package sandbox

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// officeClock is a clock the test moves; it starts at 08:00:00 in Warsaw.
type officeClock struct {
	mu    sync.Mutex
	start time.Time
	now   time.Time
}

func newOfficeClock() *officeClock {
	t := time.Date(2026, 11, 25, 7, 0, 0, 0, time.UTC) // 08:00 in Warsaw (CET)
	return &officeClock{start: t, now: t}
}

func (c *officeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *officeClock) at(d time.Duration) {
	c.mu.Lock()
	c.now = c.start.Add(d)
	c.mu.Unlock()
}

func officeHandler(t *testing.T) (*Handler, *officeClock) {
	t.Helper()
	c := newOfficeClock()
	return New(Options{Now: c.Now, Sleep: (&fakeSleep{}).Sleep, Office: true}), c
}

// find returns the first of candidates for which pick holds (the weather picks its victims by
// a hash; the test looks for one on each side).
func find(t *testing.T, pick func(string) bool, format string) string {
	t.Helper()
	for i := range 10_000 {
		if s := fmt.Sprintf(format, i); pick(s) {
			return s
		}
	}
	t.Fatalf("no candidate for %s", format)
	return ""
}

// A NIP typed wrong is refused with what is wrong with it, by every service that takes one;
// the right NIP is accepted. A client's e-mail address without "@" is refused by the mail
// server.
func TestOfficeRefusesWrongData(t *testing.T) {
	t.Parallel()
	h, _ := officeHandler(t)
	for _, c := range []struct {
		path, body string
		status     int
		message    string
	}{
		{"/vat/jpk-v7/validate", `{"clientNip":"526104082","period":"2026-10"}`, 400, "NIP „526104082” ma 9 cyfr, a powinien mieć 10"},
		{"/payroll/export", `{"clientNip":"5261400828","period":"2026-10"}`, 400, "NIP „5261400828”: cyfra kontrolna się nie zgadza (literówka w numerze?)"},
		{"/bank/statements/import", `{"clientNip":"526-10-40-8x8","period":"2026-10"}`, 400, "NIP „526-10-40-8x8” może zawierać tylko cyfry (i myślniki)"},
		{"/bank/statements/import", `{"clientNip":"52610408","period":"2026-10"}`, 400, "NIP „52610408” ma 8 cyfr, a powinien mieć 10"},
		{"/vat/jpk-v7/validate", `{"clientNip":"526-104-08-28","period":"2026-10"}`, 200, ""},
		{"/mail/send", `{"to":"zawada.piekarnia.pl","subject":"x"}`, 400, "Adres „zawada.piekarnia.pl” nie jest adresem e-mail"},
	} {
		r := do(t, h, call{target: c.path, body: c.body})
		if r.status != c.status || (c.message != "" && r.body["message"] != c.message) {
			t.Errorf("%s %s: %d %v, want %d %q", c.path, c.body, r.status, r.body["message"], c.status, c.message)
		}
	}
	for n, want := range map[int]string{1: "cyfrę", 2: "cyfry", 4: "cyfry", 5: "cyfr", 11: "cyfr", 12: "cyfr", 22: "cyfry"} {
		if got := digitsWord(n); got != want {
			t.Errorf("digitsWord(%d) = %q, want %q", n, got, want)
		}
	}
}

// The bank is down for the last minute of every three, the tax gateway for the first four
// minutes of every half hour, both counted from the sandbox's start: each says until when, in
// the office's time, with Retry-After; a call after that succeeds.
func TestOfficeOutagesEndByTheClock(t *testing.T) {
	t.Parallel()
	h, clock := officeHandler(t)
	submit := `{"clientNip":"5261040828","period":"2026-10","salesTotal":100,"purchaseTotal":50}`
	for _, c := range []struct {
		path, body string
		at         time.Duration
		status     int
		retryAfter string
		message    string
	}{
		{"/bank/statements/import", importBody, 0, 200, "", ""},
		{"/bank/statements/import", importBody, 119 * time.Second, 200, "", ""},
		{"/bank/statements/import", importBody, 2 * time.Minute, 503, "60", "API banku chwilowo niedostępne (prace serwisowe); wyciągi będą dostępne od 08:03:00"},
		{"/bank/statements/import", importBody, 2*time.Minute + 30*time.Second, 503, "30", "od 08:03:00"},
		{"/bank/statements/import", importBody, 3 * time.Minute, 200, "", ""},
		{"/bank/statements/import", importBody, 5*time.Minute + 59*time.Second, 503, "1", "od 08:06:00"},
		{"/bank/statements/from-file", importBody, 2 * time.Minute, 200, "", ""}, // the e-mailed file: the bank's outage does not reach it
		{"/vat/jpk-v7/submit", submit, 0, 503, "240", "Bramka e-Deklaracje: przerwa techniczna do 08:04:00; dokument nie został przyjęty"},
		{"/vat/jpk-v7/submit", submit, 3*time.Minute + 59*time.Second, 503, "1", "do 08:04:00"},
		{"/vat/jpk-v7/submit", submit, 4 * time.Minute, 200, "", ""},
		{"/vat/jpk-v7/submit", submit, 30 * time.Minute, 503, "240", "do 08:34:00"},
	} {
		clock.at(c.at)
		r := do(t, h, call{target: c.path, body: c.body})
		msg, _ := r.body["message"].(string)
		if r.status != c.status || r.header.Get("Retry-After") != c.retryAfter || !strings.Contains(msg, c.message) {
			t.Errorf("%s at +%v: %d Retry-After %q %q, want %d %q %q", c.path, c.at, r.status, r.header.Get("Retry-After"), msg, c.status, c.retryAfter, c.message)
		}
	}
	// The file is the statement the API gives for the same request, read from the file.
	clock.at(0)
	api, file := do(t, h, call{target: "/bank/statements/import", body: importBody}), do(t, h, call{target: "/bank/statements/from-file", body: importBody})
	if id, _ := api.body["statementId"].(string); id == "" || file.body["statementId"] != id+"-PLIK" || file.body["transactions"] != api.body["transactions"] {
		t.Errorf("the file's statement %v, the API's %v", file.body, api.body)
	}
}

// One statement in five holds an invoice not yet in KSeF: matching it is refused (404, for
// good as far as retries go) until four minutes after it was first tried; other statements
// match at once. One client in four has used up its payroll quota: the export is refused (429
// with Retry-After) for three minutes from the first try; other clients export at once.
func TestOfficeLateInvoiceAndQuota(t *testing.T) {
	t.Parallel()
	h, clock := officeHandler(t)
	late := find(t, func(s string) bool { return share(s) < shareLateInvoice }, "WB-202610-%06X")
	onTime := find(t, func(s string) bool { return share(s) >= shareLateInvoice }, "WB-202610-%06X")
	over := find(t, func(s string) bool { return share("quota "+s) < shareQuota && nipProblem(s) == "" }, "526104%04d")
	under := find(t, func(s string) bool { return share("quota "+s) >= shareQuota && nipProblem(s) == "" }, "526104%04d")
	match := func(statement string) string { return `{"statementId":"` + statement + `","transactions":12}` }
	export := func(nip string) string { return `{"clientNip":"` + nip + `","period":"2026-10","employees":3}` }
	for _, c := range []struct {
		path, body string
		at         time.Duration
		status     int
		message    string
	}{
		{"/invoices/match", match(onTime), time.Minute, 200, ""},
		{"/invoices/match", match(late), time.Minute, 404, "nie jest jeszcze w KSeF: klient jej nie przesłał"},
		{"/invoices/match", match(late), 4*time.Minute + 59*time.Second, 404, "z wyciągu " + late},
		{"/invoices/match", match(late), 5 * time.Minute, 200, ""},
		// The same statements read from the file the bank e-mailed (the import's fallback)
		// are the same statements: late or not alike, the file's late one counted with it.
		{"/invoices/match", match(onTime + "-PLIK"), time.Minute, 200, ""},
		{"/invoices/match", match(late + "-PLIK"), 5 * time.Minute, 200, ""},
		{"/payroll/export", export(under), 0, 200, ""},
		{"/payroll/export", export(over), 10 * time.Second, 429, "następny plik można wysłać o 08:03:10"},
		{"/payroll/export", export(over), 3*time.Minute + 9*time.Second, 429, "o 08:03:10"},
		{"/payroll/export", export(over), 3*time.Minute + 10*time.Second, 200, ""},
	} {
		clock.at(c.at)
		r := do(t, h, call{target: c.path, body: c.body})
		msg, _ := r.body["message"].(string)
		if r.status != c.status || !strings.Contains(msg, c.message) {
			t.Errorf("%s %s at +%v: %d %q, want %d %q", c.path, c.body, c.at, r.status, msg, c.status, c.message)
		}
		if c.status == 429 && r.header.Get("Retry-After") == "" {
			t.Errorf("a quota refusal without Retry-After")
		}
	}
}

// A busy ledger refuses a posting once; its retry (the same key, the next attempt) succeeds.
// Naming a scenario, or running without Office, keeps the weather out.
func TestOfficeBusyOnceAndOptOut(t *testing.T) {
	t.Parallel()
	h, _ := officeHandler(t)
	busy := find(t, func(s string) bool {
		return share(fmt.Sprint("/ledger/postings", map[string]any{"statementId": s, "matched": 3.0})) < shareBusyOnce
	}, "WB-202610-%06X")
	body := `{"statementId":"` + busy + `","matched":3}`
	key := func(n int) map[string]string {
		return map[string]string{"Idempotency-Key": fmt.Sprintf("wf:e1:step:post_ledger:attempt:%d", n)}
	}
	if r := do(t, h, call{target: "/ledger/postings", body: body, header: key(1)}); r.status != 503 {
		t.Errorf("first posting: %d, want 503", r.status)
	}
	if r := do(t, h, call{target: "/ledger/postings", body: body, header: key(2)}); r.status != 200 {
		t.Errorf("its retry: %d, want 200", r.status)
	}
	if r := do(t, h, call{target: "/vat/jpk-v7/submit?scenario=ok", body: `{"clientNip":"5261040828"}`}); r.status != 200 {
		t.Errorf("a named scenario met the weather: %d", r.status)
	}
	plain := New(Options{Now: newOfficeClock().Now})
	if r := do(t, plain, call{target: "/vat/jpk-v7/submit", body: `{"clientNip":"5261040828"}`}); r.status != 200 {
		t.Errorf("without Office: %d", r.status)
	}
}
