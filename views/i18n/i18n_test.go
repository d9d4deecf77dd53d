package i18n

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// pluralForms are the forms a plural message needs in each language (CLDR).
var pluralForms = map[string][]string{"en": {"one", "other"}, "pl": {"one", "few", "many", "other"}}

// messages returns the messages of lang from all its files.
func messages(t *testing.T, lang string) map[string]any {
	t.Helper()
	names, err := fs.Glob(files, "locales/*."+lang+".json")
	if err != nil || len(names) == 0 {
		t.Fatalf("no message files for %s: %v", lang, err)
	}
	m := map[string]any{}
	for _, name := range names {
		raw, err := files.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var part map[string]any
		if err := json.Unmarshal(raw, &part); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for id, v := range part {
			if _, dup := m[id]; dup {
				t.Errorf("%s: %q is in another %s file too", name, id, lang)
			}
			m[id] = v
		}
	}
	return m
}

// usedIDs finds the message ids the code passes to T and N literally, in Go and templ files
// of the module (generated *_templ.go files repeat the templ sources).
var idCall = regexp.MustCompile(`\b(?:T|N|TOr)\(\s*(?:ctx\s*,\s*)?"([a-z][a-z0-9_]*(?:\.[A-Za-z0-9_]+)+)"`)

// idLiteral finds message ids that code hands over as plain strings, to be translated later
// (a service's error message or field message, a form's error): string literals in the
// namespaces that only messages use.
var idLiteral = regexp.MustCompile(`"((?:input|auth|request|http|idemkey|form|tokens|language|timezone|locale|login|replay|bulk)\.[a-z0-9_.]*[a-z0-9_])"`)

func usedIDs(t *testing.T) map[string][]string {
	t.Helper()
	root := filepath.Join("..", "..")
	used := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "node_modules" || name == "data" {
				return filepath.SkipDir
			}
			return nil
		}
		if !(strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".templ")) || strings.HasSuffix(path, "_templ.go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, re := range []*regexp.Regexp{idCall, idLiteral} {
			for _, m := range re.FindAllStringSubmatch(string(src), -1) {
				used[m[1]] = append(used[m[1]], path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return used
}

// Every message is in both languages, with the plural forms each needs, and every id the
// code uses is in both files.
// rawInMessage finds a role's or a setting's stored form in a message: a role name as a word
// of its own, or a setting's JSON path.
var rawInMessage = regexp.MustCompile(`(?:^|[^\p{L}\p{N}_.:/@-])(owner|admin|accountant|viewer|settings\.[A-Za-z]+)(?:$|[^\p{L}\p{N}_:/@-])`)

func TestMessageFiles(t *testing.T) {
	all := map[string]map[string]any{}
	for _, lang := range Languages {
		all[lang] = messages(t, lang)
	}
	for _, lang := range Languages {
		for id, v := range all[lang] {
			for _, other := range Languages {
				if _, ok := all[other][id]; !ok {
					t.Errorf("%q is in the %s files but not in the %s files", id, lang, other)
				}
			}
			if forms, ok := v.(map[string]any); ok {
				for _, f := range pluralForms[lang] {
					if s, _ := forms[f].(string); s == "" {
						t.Errorf("%s: plural %q has no %q form", lang, id, f)
					}
				}
			} else if s, _ := v.(string); strings.TrimSpace(s) == "" {
				t.Errorf("%s: %q is empty", lang, id)
			}
		}
	}
	// Polish messages say roles and settings in words: no raw role name (except the
	// recipients field's syntax, role:admin, which is what is typed) and no JSON path of a
	// setting (settings.errorNotifications: README and the definitions' own help say those).
	for id, v := range all["pl"] {
		text, _ := v.(string)
		if m := rawInMessage.FindStringSubmatch(text); m != nil {
			t.Errorf("pl: %q says %q as it is stored: %s", id, m[1], text)
		}
	}
	used := usedIDs(t)
	if len(used) == 0 {
		t.Fatal("found no message ids in the code: the scan is broken")
	}
	for id, where := range used {
		for _, lang := range Languages {
			if _, ok := all[lang][id]; !ok {
				t.Errorf("%q (used in %s) is not in the %s files", id, strings.Join(slices.Compact(where), ", "), lang)
			}
		}
	}
}

func TestPolishPlurals(t *testing.T) {
	pl, en := New("pl", nil), New("en", nil)
	for _, c := range []struct {
		n      int
		pl, en string
	}{
		{1, "1 próba", "1 attempt"},
		{2, "2 próby", "2 attempts"},
		{4, "4 próby", "4 attempts"},
		{5, "5 prób", "5 attempts"},
		{12, "12 prób", "12 attempts"},
		{22, "22 próby", "22 attempts"},
		{25, "25 prób", "25 attempts"},
		{0, "0 prób", "0 attempts"},
	} {
		if got := pl.N("count.attempts", c.n); got != c.pl {
			t.Errorf("pl %d: %q, want %q", c.n, got, c.pl)
		}
		if got := en.N("count.attempts", c.n); got != c.en {
			t.Errorf("en %d: %q, want %q", c.n, got, c.en)
		}
	}
}

func TestRelativeTime(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	pl, en := New("pl", nil), New("en", nil)
	for _, c := range []struct {
		d      time.Duration
		pl, en string
	}{
		{3 * 24 * time.Hour, "za 3 dni", "in 3 days"},
		{-3 * 24 * time.Hour, "3 dni temu", "3 days ago"},
		{-24 * time.Hour, "1 dzień temu", "1 day ago"},
		{5 * time.Minute, "za 5 minut", "in 5 minutes"},
		{-2 * time.Minute, "2 minuty temu", "2 minutes ago"},
		{-time.Minute, "1 minutę temu", "1 minute ago"},
		{-5 * time.Hour, "5 godzin temu", "5 hours ago"},
		{10 * time.Second, "przed chwilą", "just now"},
	} {
		if got := pl.Relative(now.Add(c.d), now); got != c.pl {
			t.Errorf("pl %s: %q, want %q", c.d, got, c.pl)
		}
		if got := en.Relative(now.Add(c.d), now); got != c.en {
			t.Errorf("en %s: %q, want %q", c.d, got, c.en)
		}
	}
}

func TestFormats(t *testing.T) {
	warsaw, err := time.LoadLocation("Europe/Warsaw")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	at := time.Date(2026, 11, 23, 13, 5, 0, 0, time.UTC)
	pl, en := New("pl", warsaw), New("en", nil)
	for _, c := range []struct{ got, want string }{
		{pl.Time(at), "23 lis 2026, 14:05"},
		{en.Time(at), "23 Nov 2026, 13:05"},
		{pl.Money(1234.56), "1\u00a0234,56 zł"},
		{en.Money(1234.56), "PLN 1,234.56"},
		{en.Number(1234567.891, 2), "1,234,567.89"},
		{pl.Number(-1234, 0), "-1\u00a0234"},
		{en.Number(999, 0), "999"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
}

func TestResolve(t *testing.T) {
	for _, c := range []struct{ user, org, accept, page, api string }{
		{"", "", "", "en", "en"},
		{"", "", "pl-PL,pl;q=0.9,en;q=0.8", "pl", "pl"},
		{"", "pl", "en-US", "pl", "en"},
		{"en", "pl", "pl", "en", "pl"},
		{"", "", "de-DE", "en", "en"},
		{"", "pl", "de-DE", "pl", "pl"},
		{"xx", "", "pl", "pl", "pl"},
	} {
		if got := Resolve(c.user, c.org, c.accept); got != c.page {
			t.Errorf("Resolve(%q, %q, %q) = %q, want %q", c.user, c.org, c.accept, got, c.page)
		}
		if got := ResolveAPI(c.user, c.org, c.accept); got != c.api {
			t.Errorf("ResolveAPI(%q, %q, %q) = %q, want %q", c.user, c.org, c.accept, got, c.api)
		}
	}
}

// A service's English text with values in it is translated by its format.
func TestFormats_ServiceText(t *testing.T) {
	pl, en := New("pl", nil), New("en", nil)
	for _, c := range []struct{ in, pl string }{
		{"must be between 1000 and 300000", "musi być od 1000 do 300000"},
		{"must be between 0 and 0.5", "musi być od 0 do 0,5"},
		{"must be between 1 and 2.25", "musi być od 1 do 2,25"},
		{"must have at most 50 steps", "może mieć najwyżej 50 kroków"},
		{`template "{{ steps.x.output }}" names unknown step "x"`, `szablon "{{ steps.x.output }}" wskazuje nieznany krok "x"`},
		{"The workflow definition has errors.", "Definicja przepływu zawiera błędy."},
		{"input.notjson", "Dane wejściowe nie są poprawnym JSON-em."},
		{"something no format knows", "something no format knows"},
		// encoding/json's own errors, inside ours.
		{"is not valid JSON: unexpected end of JSON input", "nie jest poprawnym JSON-em: dane JSON urywają się przed końcem"},
		{`unknown field "maxRetrys"`, `nieznane pole "maxRetrys"`},
		{"invalid character '}' looking for beginning of object key string", "nieprawidłowy znak '}' tam, gdzie powinna być nazwa pola w cudzysłowie"},
		// Of two formats that match, the one with more fixed text.
		{`template "{{ steps.x.output }}" at body.a: unknown step "x"`, `szablon "{{ steps.x.output }}" w body.a: nieznany krok "x"`},
		{`http step url "ftp://x" must be an absolute http or https URL (not "ftp:")`, `adres kroku http "ftp://x" musi być pełnym adresem http lub https (a nie "ftp:")`},
		{"The delivery is pending; only sent or failed deliveries can be sent again.", "Wysyłka oczekuje; ponownie można wysłać tylko wysyłki wysłane lub niedostarczone."},
		{"The delivery is queued; only sent or failed deliveries can be sent again.", "Stan wysyłki to queued; ponownie można wysłać tylko wysyłki wysłane lub niedostarczone."},
	} {
		if got := pl.Text(c.in); got != c.pl {
			t.Errorf("pl %q: %q, want %q", c.in, got, c.pl)
		}
	}
	if got := en.Text("must be between 1000 and 300000"); got != "must be between 1000 and 300000" {
		t.Errorf("en: %q", got)
	}
	if got := en.Text("input.notjson"); got != "The input is not valid JSON." {
		t.Errorf("en id: %q", got)
	}
}

// A value that itself has a translation (a cursor's reason) is found through its pattern.
func TestFormats_Cursor(t *testing.T) {
	got := New("pl", nil).Text(`is too long; use the "next" value of the previous page, or leave it out for the first page`)
	if got != `jest za długi; użyj wartości "next" z poprzedniej strony albo pomiń ją na pierwszej stronie` {
		t.Errorf("%q", got)
	}
}

// The engine's own sentences, stored with an attempt or a dead letter, read in Polish.
func TestFormats_EngineText(t *testing.T) {
	pl := New("pl", nil)
	for _, c := range []struct{ in, pl string }{
		{"The process running this step stopped 3 times before the step finished (its lease ran out each time); it was not run again.",
			"Proces wykonujący ten krok zatrzymał się 3 razy, zanim krok się zakończył (za każdym razem wygasła jego dzierżawa); kroku nie uruchomiono ponownie."},
		{`step type "ksef" is not registered in this process`, `typ kroku "ksef" nie jest zarejestrowany w tym procesie`},
		{"Waiting on the circuit breaker until 2026-11-23T10:00:00Z", "Czeka na bezpiecznik do 2026-11-23T10:00:00Z"},
		{"clientNip: NIP must have 10 digits (400 Bad Request)", "clientNip: NIP must have 10 digits (400 Błędne żądanie)"},
		{"service unavailable (503 Service Unavailable)", "service unavailable (503 Usługa niedostępna)"},
		// Role names inside a refusal read in Polish too, never "accountant" (issue 21).
		{"Your role (accountant) cannot do this; it needs admin or above.", "Twoja rola (księgowy) na to nie pozwala; potrzebna jest rola administrator lub wyższa."},
		{"Your role (viewer) cannot do this; it needs accountant or above.", "Twoja rola (podgląd) na to nie pozwala; potrzebna jest rola księgowy lub wyższa."},
		// An ask step's refusals, built from who answered and their note (not found by the
		// scan of TestServiceTextsInPolish: the text is trimmed after it is formatted).
		{"Rejected by anna@biuro.pl: kwota się nie zgadza", "Odrzucone przez anna@biuro.pl: kwota się nie zgadza"},
		{"Rejected by anna@biuro.pl", "Odrzucone przez anna@biuro.pl"},
		{"Aborted by Jan Nowak: klient wycofał zlecenie", "Przerwane przez Jan Nowak: klient wycofał zlecenie"},
		{`Step "post" (position 3) is not in version 2 of the workflow: the attempt cannot run.`,
			`Kroku "post" (pozycja 3) nie ma w wersji 2 przepływu: próby nie można wykonać.`},
		{"The circuit breaker stayed open longer than the step may wait (24h0m0s); the step was not run.",
			"Bezpiecznik był otwarty dłużej, niż krok może czekać (24h0m0s); kroku nie uruchomiono."},
		// A database_operation compensation refused for its key table: the SQL stays as it is.
		{`the compensations' key table lifeline_compensation_keys does not exist and the connection's role "erp" may not create it (no CREATE on schema public): ` +
			`CREATE TABLE lifeline_compensation_keys (key TEXT PRIMARY KEY, executed_at TIMESTAMPTZ NOT NULL DEFAULT now(), rows_affected BIGINT); ` +
			`GRANT SELECT, INSERT, UPDATE ON lifeline_compensation_keys TO "erp"`,
			`tabela kluczy kompensacji lifeline_compensation_keys nie istnieje, a rola połączenia "erp" nie może jej utworzyć (brak prawa CREATE w schemacie public): ` +
				`CREATE TABLE lifeline_compensation_keys (key TEXT PRIMARY KEY, executed_at TIMESTAMPTZ NOT NULL DEFAULT now(), rows_affected BIGINT); ` +
				`GRANT SELECT, INSERT, UPDATE ON lifeline_compensation_keys TO "erp"`},
		{"the compensations' key table ledger.keys cannot be created: its schema does not exist (ledger); create the schema, or name another table in the connection's settings",
			"nie można utworzyć tabeli kluczy kompensacji ledger.keys: jej schemat nie istnieje (ledger); utwórz schemat albo wskaż inną tabelę w ustawieniach połączenia"},
	} {
		if got := pl.Text(c.in); got != c.pl {
			t.Errorf("pl %q:\n got %q\nwant %q", c.in, got, c.pl)
		}
	}
}

// Attempts and what comes next read to the second (issue 21).
func TestTimeToTheSecond(t *testing.T) {
	waw, _ := time.LoadLocation("Europe/Warsaw")
	pl, en := New("pl", waw), New("en", time.UTC)
	at := time.Date(2026, 11, 25, 7, 14, 7, 0, time.UTC)
	if got := pl.TimeSec(at); got != "25 lis 2026, 08:14:07" {
		t.Errorf("TimeSec pl = %q", got)
	}
	if got := en.TimeSec(at); got != "25 Nov 2026, 07:14:07" {
		t.Errorf("TimeSec en = %q", got)
	}
	for _, c := range []struct {
		d      time.Duration
		pl, en string
	}{
		{12 * time.Second, "za 12 sekund", "in 12 seconds"},
		{-2 * time.Second, "2 sekundy temu", "2 seconds ago"},
		{time.Second, "za 1 sekundę", "in 1 second"},
		{0, "", ""},
		{5 * time.Minute, "za 5 minut", "in 5 minutes"},
	} {
		if c.pl == "" {
			continue
		}
		if got := pl.RelativeSec(at.Add(c.d), at); got != c.pl {
			t.Errorf("RelativeSec pl %v = %q, want %q", c.d, got, c.pl)
		}
		if got := en.RelativeSec(at.Add(c.d), at); got != c.en {
			t.Errorf("RelativeSec en %v = %q, want %q", c.d, got, c.en)
		}
	}
}

// TestFormats_UTCTimeInReadersZone: the reason of an item posting into a closed period
// says when the period was closed; the engine writes it in UTC, and the page showed
// "2026-11-25 12:49 UTC" in the reason and "25 lis 2026, 13:49" in the notice beside it
// (the demo's walk, issue 21). The reason now reads in the reader's zone and format; a
// group title's placeholder for the time loses its "UTC". English, the services' own text
// (no format rewrites it), has its times in the reader's zone too.
func TestFormats_UTCTimeInReadersZone(t *testing.T) {
	warsaw, err := time.LoadLocation("Europe/Warsaw")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	pl, en := New("pl", warsaw), New("en", warsaw)
	reason := `The period 2026-09 is closed for client Kowalski Sp. z o.o. (closed by admin on 2026-11-25 12:49 UTC); the step "Księgowanie w dzienniku" posts to it and was not run.`
	for _, c := range []struct {
		l       *Localizer
		in      string
		want    string
		notWant string
	}{
		{pl, reason, "25 lis 2026, 13:49); krok", "UTC"},
		{pl, `The period … is closed for client Kowalski Sp. z o.o. (closed by admin on … UTC); the step "…" posts to it and was not run.`, "administrator, …); krok", "UTC"},
		{en, reason, "(closed by admin on " + en.Time(time.Date(2026, 11, 25, 12, 49, 0, 0, time.UTC)) + "); the step", "UTC"},
		{en, `The period … is closed for client Kowalski Sp. z o.o. (closed by admin on … UTC); the step "…" posts to it and was not run.`, "(closed by admin on …); the step", "UTC"},
		{en, "Token expired at 2026-11-25 07:26:05 UTC", "Token expired at " + en.Time(time.Date(2026, 11, 25, 7, 26, 5, 0, time.UTC)), "UTC"},
		{en, "Service unavailable until 12:00 UTC+1", "until 12:00 UTC+1", "13:00"},
	} {
		got := c.l.Text(c.in)
		if !strings.Contains(got, c.want) || strings.Contains(got, c.notWant) {
			t.Errorf("%s %q:\n got %q\nwant it to hold %q and not %q", c.l.Lang(), c.in, got, c.want, c.notWant)
		}
	}
}

// A message's times (notifications: an e-mail, Slack, Teams, the inbox) read as the page's
// do, in the reader's language and zone, to the second only when they have seconds, with
// the zone named: "do 2026-12-22 00:00:00 CET" in a request to the partner was ISO.
func TestCatalogTime(t *testing.T) {
	waw, err := time.LoadLocation("Europe/Warsaw")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	for _, c := range []struct {
		lang string
		zone *time.Location
		at   time.Time
		want string
	}{
		{"pl", waw, time.Date(2026, 12, 21, 23, 0, 0, 0, time.UTC), "22 gru 2026, 00:00 CET"},
		{"pl", waw, time.Date(2026, 11, 23, 9, 0, 10, 0, time.UTC), "23 lis 2026, 10:00:10 CET"},
		{"en", waw, time.Date(2026, 7, 1, 6, 30, 0, 0, time.UTC), "1 Jul 2026, 08:30 CEST"},
		{"en", nil, time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC), "23 Nov 2026, 09:00 UTC"},
	} {
		if got := (Catalog{}).Time(c.lang, c.zone, c.at); got != c.want {
			t.Errorf("Time(%s, %v) = %q, want %q", c.lang, c.at, got, c.want)
		}
	}
}
