package poison_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/poison"
)

func TestValues(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want []string // kind:key
	}{
		{`{"nip": "5260250274", "period": "2026-10"}`, []string{"nip:5260250274"}},
		{`{"nip": "PL 526-025-02-74"}`, nil}, // a space inside: not a whole identifier
		{`{"client": {"nip": "526-025-02-74"}, "invoice": "FV/2026/10/123"}`, []string{"nip:5260250274", "invoice:FV/2026/10/123"}},
		{`{"pesel": "44051401359", "regon": 123456785, "amount": 1234.5}`, []string{"pesel:44051401359", "regon:123456785"}},
		{`{"account": "PL61 1090 1014 0000 0712 1981 2874"}`, []string{"iban:61109010140000071219812874"}},
		{`{"ksef": "5260250274-20261025-0A1B2C3D4E-5F", "note": "FV/2026/10/123 zapłacona"}`, []string{"ksef:5260250274-20261025-0A1B2C3D4E-5F"}},
		{`{"client": "Kowalski", "n": 12}`, nil},
		{`not json`, nil},
	} {
		var got []string
		for _, v := range poison.Values([]byte(c.in)) {
			got = append(got, v.Kind+":"+v.Key)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Values(%s) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestCheck: a value that failed in two workflows, or three times in one (a failure and two
// manual retries that failed again), is poison; one failure is not; another organization's
// items and a value inside a longer number do not count.
func TestCheck(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		now := time.Now().UTC()
		tx := db.Conn(ctx)
		orgs := []string{models.NewID(), models.NewID()}
		for _, id := range orgs {
			if err := tx.Create(&models.Organization{ID: id, Name: "Biuro " + id[:6], CreatedAt: now}).Error; err != nil {
				t.Fatal(err)
			}
		}
		wfs := map[string]string{}
		var itemOf func(org, workflow, input string, retries int, status, errorType, reason string) string
		wf := func(org, name string) string {
			if id, ok := wfs[org+name]; ok {
				return id
			}
			w := models.Workflow{ID: models.NewID(), OrganizationID: org, Name: name, Version: 1, Definition: models.JSON(`{}`),
				UnknownErrors: "retry", WebhookToken: models.NewID(), WebhookSecret: "s", CreatedAt: now, UpdatedAt: now}
			if err := tx.Create(&w).Error; err != nil {
				t.Fatal(err)
			}
			wfs[org+name] = w.ID
			return w.ID
		}
		item := func(org, workflow, input string, retries int, status string) string {
			return itemOf(org, workflow, input, retries, status, "validation", "x")
		}
		itemOf = func(org, workflow, input string, retries int, status, errorType, reason string) string {
			w := wf(org, workflow)
			ex := models.Execution{ID: models.NewID(), OrganizationID: org, WorkflowID: w, WorkflowVersion: 1, Status: models.ExecDLQPending,
				Input: models.JSON(input), TriggerType: "api", CorrelationID: "c", CreatedAt: now, UpdatedAt: now}
			rec := models.ExecutionError{ID: models.NewID(), OrganizationID: org, ExecutionID: ex.ID, StepID: "s", ErrorType: errorType,
				ErrorMessage: "x", Status: models.ErrDeadLetter, CreatedAt: now, UpdatedAt: now}
			dl := models.DeadLetter{ID: models.NewID(), OrganizationID: org, ErrorID: rec.ID, WorkflowID: w, ExecutionID: ex.ID,
				OriginalInput: models.JSON(input), StepStates: models.JSON(`[]`), FailedStepID: "s", Status: status, ManualRetryCount: retries,
				ErrorType: errorType, Reason: reason, SearchText: models.SearchText(input), ExpiresAt: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now}
			for _, row := range []any{&ex, &rec, &dl} {
				if err := tx.Create(row).Error; err != nil {
					t.Fatal(err)
				}
			}
			return dl.ID
		}
		org, other := orgs[0], orgs[1]
		inVAT := item(org, "VAT", `{"invoice": "FV/2026/10/123", "nip": "5260250274"}`, 0, models.DLQPending)
		item(org, "KSeF", `{"doc": {"number": "FV/2026/10/123"}}`, 0, models.DLQPending)
		item(org, "VAT", `{"nip": "7010002137"}`, 2, models.DLQPending)
		item(org, "VAT", `{"nip": "17010002137"}`, 0, models.DLQPending) // a PESEL holding the NIP's digits
		item(other, "VAT", `{"nip": "5260250274"}`, 5, models.DLQPending)
		item(other, "JPK", `{"nip": "5260250274"}`, 0, models.DLQPending)

		svc := &poison.Service{DB: db}
		flags, err := svc.Item(ctx, org, inVAT)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]poison.Flag{}
		for _, f := range flags {
			got[f.Kind] = f
		}
		if f := got["invoice"]; !f.Poison || f.Workflows != 2 || f.Items != 2 || f.Failures != 2 {
			t.Errorf("invoice in two workflows: %+v", f)
		}
		if f := got["nip"]; f.Poison || f.Items != 1 || f.Workflows != 1 {
			t.Errorf("a NIP failed once here (the other organization's do not count): %+v", f)
		}
		flags, err = svc.Check(ctx, org, []byte(`{"nip": "7010002137"}`))
		if err != nil || len(flags) != 1 || !flags[0].Poison || flags[0].Failures != 3 || flags[0].Items != 1 {
			t.Errorf("three failures in one workflow: %+v %v", flags, err)
		}
		// A client's NIP is in each of its runs: the bank down, a rate limit or an expired token
		// failing runs of three workflows, twice over, is the service's doing, not the NIP's,
		// and a value that also failed once on its data is still one failure.
		for i, typ := range []string{"transient", "rate_limit", "authorization", "timeout", "external_service"} {
			itemOf(org, []string{"Bank", "Payroll", "KSeF"}[i%3], `{"clientNip": "1736222016"}`, 1, models.DLQPending, typ, "x")
		}
		itemOf(org, "Payroll", `{"clientNip": "1736222016"}`, 0, models.DLQResolved, "permanent", "x")
		flags, err = svc.Check(ctx, org, []byte(`{"clientNip": "1736222016"}`))
		if err != nil || len(flags) != 1 || flags[0].Poison || flags[0].Failures != 1 || flags[0].Workflows != 1 {
			t.Errorf("a NIP whose runs failed for the services' reasons, and once on its data: %+v %v", flags, err)
		}
		// Three invoices of one client the tax office has not got yet: each failure names its
		// invoice, not the client's NIP (written with dashes in the input, named by its
		// digits when a reason names it). The NIP is no suspect; an invoice that failed three
		// times is.
		for i, inv := range []string{"FV/2026/11/7", "FV/2026/11/8", "FV/2026/11/9", "FV/2026/11/9"} {
			itemOf(org, "KSeF", fmt.Sprintf(`{"invoice": %q, "clientNip": "951-234-56-78"}`, inv), i/3, models.DLQPending, "permanent",
				"Faktura zakupu "+inv+" nie jest jeszcze w KSeF: klient jej nie przesłał (404 Not Found)")
		}
		flags, err = svc.Check(ctx, org, []byte(`{"invoice": "FV/2026/11/9", "clientNip": "951-234-56-78"}`))
		got = map[string]poison.Flag{}
		for _, f := range flags {
			got[f.Kind] = f
		}
		if f := got["nip"]; err != nil || f.Poison || f.Items != 0 {
			t.Errorf("a client's NIP beside invoices the failures name: %+v %v", f, err)
		}
		if f := got["invoice"]; !f.Poison || f.Items != 2 || f.Failures != 3 {
			t.Errorf("an invoice named by three failures: %+v", f)
		}
		// A reason that names the NIP counts for it.
		for range 3 {
			itemOf(org, "VAT", `{"invoice": "FV/2026/11/10", "clientNip": "951-234-56-78"}`, 0, models.DLQPending, "validation",
				"NIP 9512345678: cyfra kontrolna się nie zgadza")
		}
		flags, err = svc.Check(ctx, org, []byte(`{"clientNip": "951-234-56-78"}`))
		if err != nil || len(flags) != 1 || !flags[0].Poison || flags[0].Items != 3 {
			t.Errorf("a NIP the failures name: %+v %v", flags, err)
		}
		// The demo's bank import of one client: its statement's invoice, read by the step (not
		// in the input), is not in KSeF yet, five times over two periods. The failures are
		// about that invoice; the client's NIP is no suspect.
		for i := range 5 {
			itemOf(org, "Bank", fmt.Sprintf(`{"clientNip": "4562582995", "period": "2026-%02d"}`, 9+i%2), 0, models.DLQPending, "permanent",
				"Faktura zakupu FV/2026/10/1853 na 22 210,46 zł z wyciągu WB-202610-8A7379 nie jest jeszcze w KSeF: klient jej nie przesłał (404 Not Found)")
		}
		flags, err = svc.Check(ctx, org, []byte(`{"clientNip": "4562582995"}`))
		if err != nil || len(flags) != 1 || flags[0].Poison || flags[0].Items != 0 {
			t.Errorf("a client's NIP beside an invoice of its statement the failures name: %+v %v", flags, err)
		}
		// An item the expired token failed says nothing of its values, poison or not: its page
		// and its group's flag none of them (the NIP above is poison by its own failures).
		token := itemOf(org, "KSeF", `{"clientNip": "951-234-56-78"}`, 0, models.DLQPending, "authorization",
			"Token KSeF wygasł 26.11 o 00:54 — administrator musi wgrać nowy (401 Unauthorized)")
		g := models.Group{ID: models.NewID(), OrganizationID: org, Fingerprint: "token", Version: 1, WorkflowID: wf(org, "KSeF"), StepID: "s",
			ErrorType: "authorization", Title: "Token KSeF wygasł …", State: "open", FirstSeenAt: now, LastSeenAt: now, CreatedAt: now, UpdatedAt: now}
		if err := tx.Create(&g).Error; err != nil {
			t.Fatal(err)
		}
		groupID := g.ID
		if err := tx.Exec("UPDATE dead_letter_queue SET group_id = ? WHERE id = ?", groupID, token).Error; err != nil {
			t.Fatal(err)
		}
		// (Its values are still checked, as the API says of every identifier in an input: the
		// NIP is poison, but not here.)
		for name, check := range map[string]func() ([]poison.Flag, error){
			"item":  func() ([]poison.Flag, error) { return svc.Item(ctx, org, token) },
			"group": func() ([]poison.Flag, error) { return svc.Group(ctx, org, groupID) },
		} {
			if flags, err := check(); err != nil || len(flags) != 1 || !flags[0].Poison || flags[0].Here {
				t.Errorf("the expired token's %s: %+v %v", name, flags, err)
			}
		}
		// A contractor's NIP the service names, no longer an active VAT payer, three times:
		// the invoice that names the contractor is poison, the client's NIP is not.
		var contractor string
		for range 3 {
			contractor = itemOf(org, "VAT", `{"invoice": "FV/2026/11/20", "clientNip": "4562582995"}`, 0, models.DLQPending, "validation",
				"Kontrahent (NIP 5260250274) nie jest czynnym podatnikiem VAT.")
		}
		flags, err = svc.Item(ctx, org, contractor)
		got = map[string]poison.Flag{}
		for _, f := range flags {
			got[f.Kind] = f
		}
		if f := got["invoice"]; err != nil || !f.Poison || !f.Here || f.Items != 3 {
			t.Errorf("the invoice of an inactive contractor: %+v %v", f, err)
		}
		if f := got["nip"]; f.Poison || f.Here || f.Items != 0 {
			t.Errorf("the client's NIP beside an inactive contractor: %+v", f)
		}
		if _, err := svc.Item(ctx, other, inVAT); err == nil {
			t.Error("another organization's item was read")
		}
	})
}

func TestNamesOther(t *testing.T) {
	t.Parallel()
	vs := poison.Values([]byte(`{"invoice": "FV/2026/11/1", "nip": "951-234-56-78", "period": "2026-10"}`))
	for _, tc := range []struct {
		reason string
		want   bool
	}{
		{"Faktura zakupu FV/2026/10/1853 na 22 210,46 zł z wyciągu WB-202610-8A7379 nie jest jeszcze w KSeF", true},
		{"Kontrahent (NIP 5260250274) nie jest czynnym podatnikiem VAT.", true},
		// Numbers with a NIP's, a REGON's or a PESEL's shape but not their check digit are
		// references, phones, timestamps.
		{"Kontrahent (NIP 7010002137) nie istnieje", false},
		{"referencja 1764115200", false},
		{"Zapytanie 20261123101011 odrzucone", false},
		{"tel. 123456789", false},
		{"PESEL 44051401359 jest nieprawidłowy", true},
		{"REGON 123456785", true},
		{"konto PL61109010140000071219812874", true},
		{"konto PL61109010140000071219812875", false},
		{"Faktura „FV/2026/11/1” nie istnieje", false},
		{"NIP 9512345678: cyfra kontrolna się nie zgadza", false},
		{"Bramka e-Deklaracje: przerwa techniczna do 01:13:37 (503 Service Unavailable)", false},
		{"kwota 1234567890,00 zł", false},
		{"", false},
	} {
		if got := poison.NamesOther(tc.reason, vs); got != tc.want {
			t.Errorf("%q names another identifier: %v, want %v", tc.reason, got, tc.want)
		}
	}
}

func TestNamedIn(t *testing.T) {
	t.Parallel()
	vs := poison.Values([]byte(`{"a": "FV/2026/11/1", "b": "FV/2026/11/10", "nip": "951-234-56-78"}`))
	for _, tc := range []struct {
		reason string
		want   []string
	}{
		{"Faktura FV/2026/11/10 nie jest w KSeF", []string{"FV/2026/11/10"}},
		{"Faktura FV/2026/11/1: brak", []string{"FV/2026/11/1"}},
		{"NIP 9512345678 ma złą cyfrę kontrolną", []string{"9512345678"}},
		{"NIP 951-234-56-78 ma złą cyfrę kontrolną", []string{"9512345678"}},
		{"konto 19512345678901", nil},
		{"faktura fv/2026/11/1 nie istnieje", []string{"FV/2026/11/1"}},
		{"usługa niedostępna", nil},
	} {
		var got []string
		for _, v := range poison.NamedIn(tc.reason, vs) {
			got = append(got, v.Key)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%q names %v, want %v", tc.reason, got, tc.want)
		}
	}
}
