//go:build ignore

// Command preview renders every page with sample data to static HTML files so
// the UI can be looked at (and screenshotted) without a server or database:
//
//	cd /work/main && go run views/testdata/preview/main.go [-out /tmp/lifeline-preview]
//
// It writes one .html per page plus a copy of static/ beside them, and
// rewrites "/static/" to "static/" in the output so file:// URLs resolve.
// The real templates keep their absolute /static/ paths.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"

	"github.com/a-h/templ"

	"lifeline/static"
	"lifeline/views/layouts"
	"lifeline/views/pages"
)

func main() {
	out := flag.String("out", "/tmp/lifeline-preview", "output directory")
	flag.Parse()
	if err := run(*out); err != nil {
		log.Fatal(err)
	}
}

func run(out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := copyStatic(filepath.Join(out, "static")); err != nil {
		return err
	}
	for name, c := range samplePages() {
		var buf bytes.Buffer
		if err := c.Render(context.Background(), &buf); err != nil {
			return fmt.Errorf("render %s: %w", name, err)
		}
		html := bytes.ReplaceAll(buf.Bytes(), []byte(`"/static/`), []byte(`"static/`))
		if err := os.WriteFile(filepath.Join(out, name+".html"), html, 0o644); err != nil {
			return err
		}
		fmt.Println(filepath.Join(out, name+".html"))
	}
	return nil
}

func copyStatic(dst string) error {
	return fs.WalkDir(static.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		target := filepath.Join(dst, path)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := fs.ReadFile(static.FS, path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

func page(title string, active string, dlqCount int) layouts.Page {
	nav := []layouts.NavItem{
		{Label: "Workflows", URL: "workflows.html"},
		{Label: "Executions", URL: "executions.html"},
		{Label: "Dead letters", URL: "dlq.html", Badge: dlqCount},
	}
	for i := range nav {
		nav[i].Active = nav[i].Label == active
	}
	return layouts.Page{
		Title:     title,
		OrgName:   "Biuro Rachunkowe Nowak i Wspólnicy",
		UserEmail: "anna.kowalska@nowak-ksiegowosc.pl",
		Role:      "editor",
		CSRFToken: `tok"en<x>&1`,
		Nav:       nav,
		LogoutURL: "/logout",
	}
}

const vatName = "Miesięczna deklaracja VAT (JPK_V7)"

func execRows() []pages.ExecutionRow {
	return []pages.ExecutionRow{
		{ID: "01J9ZQ4X7M2K8N3P5R6S7T8V9W", ShortID: "01J9ZQ4X", Subject: "Piekarnia Zielińscy s.c. · 2025-02", URL: "execution-failed.html", WorkflowName: vatName, WorkflowURL: "workflow.html", Status: "DLQ", Trigger: "schedule", CreatedAt: "2025-03-25T07:00:02Z", CreatedAtText: "2025-03-25 07:00 UTC", Duration: "6m 12s", CurrentStep: "Wysyłka do e-Deklaracji", ErrorType: "authorization", ErrorMessage: "Bramka e-Deklaracje odrzuciła podpis: certyfikat kwalifikowany wygasł 2025-03-21."},
		{ID: "01J9ZQ3A1B2C3D4E5F6G7H8J9K", ShortID: "01J9ZQ3A", URL: "execution-live.html", WorkflowName: "Dopasowanie faktur z KSeF", WorkflowURL: "workflow.html", Status: "RETRYING", Trigger: "webhook", CreatedAt: "2025-03-25T06:58:40Z", CreatedAtText: "2025-03-25 06:58 UTC", Duration: "1m 40s", CurrentStep: "Pobranie faktur z KSeF", ErrorType: "rate_limit", ErrorMessage: "KSeF API: 429 Too Many Requests (Retry-After: 30)"},
		{ID: "01J9ZQ2Z9Y8X7W6V5U4T3S2R1Q", ShortID: "01J9ZQ2Z", URL: "execution-live.html", WorkflowName: "Księgowanie do Comarch Optima", WorkflowURL: "workflow.html", Status: "RUNNING", Trigger: "manual", CreatedAt: "2025-03-25T06:57:11Z", CreatedAtText: "2025-03-25 06:57 UTC", Duration: "3m 09s", CurrentStep: "Zaksięgowanie dokumentów"},
		{ID: "01J9ZPZZ0000AAAABBBBCCCCDD", ShortID: "01J9ZPZZ", URL: "execution-failed.html", WorkflowName: "Import wyciągu bankowego (mBank MT940)", WorkflowURL: "workflow.html", Status: "SUCCEEDED", Trigger: "schedule", CreatedAt: "2025-03-25T06:30:00Z", CreatedAtText: "2025-03-25 06:30 UTC", Duration: "41s"},
		{ID: "01J9ZPY1111222233334444555", ShortID: "01J9ZPY1", URL: "execution-failed.html", WorkflowName: vatName, WorkflowURL: "workflow.html", Status: "FAILED", Trigger: "manual", CreatedAt: "2025-03-24T15:12:45Z", CreatedAtText: "2025-03-24 15:12 UTC", Duration: "12s", CurrentStep: "Budowa pliku JPK", ErrorType: "validation", ErrorMessage: "Pole P_13_1 (podstawa opodatkowania 23%) nie zgadza się z sumą faktur sprzedaży: 48 210,00 ≠ 48 120,00 PLN."},
		{ID: "01J9ZPX9999888877776666555", ShortID: "01J9ZPX9", URL: "execution-failed.html", WorkflowName: "Dopasowanie faktur z KSeF", WorkflowURL: "workflow.html", Status: "PARTIAL", Trigger: "schedule", CreatedAt: "2025-03-24T12:00:00Z", CreatedAtText: "2025-03-24 12:00 UTC", Duration: "2m 03s", CurrentStep: "Dopasowanie płatności", ErrorType: "permanent", ErrorMessage: "3 z 112 faktur bez pasującej płatności."},
		{ID: "01J9ZPW0000111122223333444", ShortID: "01J9ZPW0", URL: "execution-failed.html", WorkflowName: "Import wyciągu bankowego (mBank MT940)", WorkflowURL: "workflow.html", Status: "PENDING", Trigger: "schedule", CreatedAt: "2025-03-25T07:01:00Z", CreatedAtText: "2025-03-25 07:01 UTC"},
		{ID: "01J9ZPV5555444433332222111", ShortID: "01J9ZPV5", URL: "execution-failed.html", WorkflowName: "Przypomnienie o płatności ZUS", WorkflowURL: "workflow.html", Status: "SKIPPED", Trigger: "schedule", CreatedAt: "2025-03-24T06:00:00Z", CreatedAtText: "2025-03-24 06:00 UTC", Duration: "0s", CurrentStep: "Warunek: termin płatności"},
	}
}

// dlqRows are sample dead letters with the list's own columns filled (subjects, reasons,
// retries, ages and expiries; the first expires within 3 days).
func dlqRows() []pages.DLQRow {
	rows := dlqBaseRows()
	subjects := []string{"Piekarnia Zielińscy s.c. · 2025-02", "Kancelaria Nowak i Wspólnicy sp.k. · 2025-02", "", "Hurtownia Kowalczyk sp. z o.o. · 2025-03", "Piekarnia Zielińscy s.c. · 2025-02", ""}
	ages := []string{"28 dni temu", "28 dni temu", "8 godzin temu", "5 dni temu", "22 dni temu", "43 dni temu"}
	for i := range rows {
		r := &rows[i]
		r.Title, r.HasSubject, r.ShortID = subjects[i], subjects[i] != "", "01J9ZQ"+fmt.Sprint(i)
		if r.Title == "" {
			r.Title = r.ShortID
		}
		r.Reason, r.RetryCount, r.Age, r.FailedStepID = r.ErrorMessage, i%4, ages[i], "step_"+fmt.Sprint(i)
		if r.Status == "pending" || r.Status == "processing" {
			r.ExpiresIn = "za 29 dni"
		}
	}
	rows[0].ExpiresIn, rows[0].Expiring = "za 2 dni", true
	return rows
}

func dlqBaseRows() []pages.DLQRow {
	return []pages.DLQRow{
		{ID: "dl_7f3a9c", URL: "dlq-item.html", ExecutionURL: "execution-failed.html", WorkflowName: vatName, WorkflowURL: "workflow.html", FailedStep: "Wysyłka do e-Deklaracji", ErrorType: "authorization", ErrorMessage: "Bramka e-Deklaracje odrzuciła podpis: certyfikat kwalifikowany wygasł 2025-03-21.", Status: "pending", CreatedAt: "2025-03-25T07:06:14Z", CreatedAtText: "2025-03-25 07:06 UTC", ExpiresAt: "2025-04-24T07:06:14Z", ExpiresAtText: "2025-04-24 07:06 UTC"},
		{ID: "dl_7f3a9d", URL: "dlq-item.html", ExecutionURL: "execution-failed.html", WorkflowName: vatName, WorkflowURL: "workflow.html", FailedStep: "Wysyłka do e-Deklaracji", ErrorType: "authorization", ErrorMessage: "Bramka e-Deklaracje odrzuciła podpis: certyfikat kwalifikowany wygasł 2025-03-21.", Status: "pending", CreatedAt: "2025-03-25T07:06:02Z", CreatedAtText: "2025-03-25 07:06 UTC", ExpiresAt: "2025-04-24T07:06:02Z", ExpiresAtText: "2025-04-24 07:06 UTC"},
		{ID: "dl_6b21e0", URL: "dlq-item.html", ExecutionURL: "execution-failed.html", WorkflowName: "Import wyciągu bankowego (mBank MT940)", WorkflowURL: "workflow.html", FailedStep: "Pobranie wyciągu", ErrorType: "timeout", ErrorMessage: "Brak odpowiedzi z api.mbank.pl w ciągu 30 s (5 prób).", Status: "processing", CreatedAt: "2025-03-24T22:10:00Z", CreatedAtText: "2025-03-24 22:10 UTC", ExpiresAt: "2025-04-23T22:10:00Z", ExpiresAtText: "2025-04-23 22:10 UTC"},
		{ID: "dl_5c10aa", URL: "dlq-item.html", ExecutionURL: "execution-failed.html", WorkflowName: "Dopasowanie faktur z KSeF", WorkflowURL: "workflow.html", FailedStep: "Pobranie faktur z KSeF", ErrorType: "external_service", ErrorMessage: "KSeF zwrócił 503 Service Unavailable (przerwa techniczna).", Status: "resolved", CreatedAt: "2025-03-20T09:30:00Z", CreatedAtText: "2025-03-20 09:30 UTC", ExpiresAt: "2025-04-19T09:30:00Z", ExpiresAtText: "2025-04-19 09:30 UTC"},
		{ID: "dl_4a0f01", URL: "dlq-item.html", ExecutionURL: "execution-failed.html", WorkflowName: "Księgowanie do Comarch Optima", WorkflowURL: "workflow.html", FailedStep: "Zaksięgowanie dokumentów", ErrorType: "validation", ErrorMessage: "Konto 221-1 nie istnieje w planie kont klienta „Piekarnia Zielińscy s.c.”.", Status: "skipped", CreatedAt: "2025-03-03T11:00:00Z", CreatedAtText: "2025-03-03 11:00 UTC", ExpiresAt: "2025-04-02T11:00:00Z", ExpiresAtText: "2025-04-02 11:00 UTC"},
		{ID: "dl_39ff00", URL: "dlq-item.html", ExecutionURL: "", WorkflowName: "Przypomnienie o płatności ZUS", WorkflowURL: "workflow.html", FailedStep: "Wysłanie e-maila", ErrorType: "unknown", ErrorMessage: "unexpected EOF", Status: "expired", CreatedAt: "2025-02-10T06:00:00Z", CreatedAtText: "2025-02-10 06:00 UTC", ExpiresAt: "2025-03-12T06:00:00Z", ExpiresAtText: "2025-03-12 06:00 UTC"},
	}
}

func statusOptions(selected string, values ...string) []pages.Option {
	var opts []pages.Option
	for _, v := range values {
		opts = append(opts, pages.Option{Value: v, Label: v, Selected: v == selected})
	}
	return opts
}

func workflowOptions() []pages.Option {
	return []pages.Option{
		{Value: "wf_vat", Label: vatName},
		{Value: "wf_bank", Label: "Import wyciągu bankowego (mBank MT940)"},
		{Value: "wf_ksef", Label: "Dopasowanie faktur z KSeF"},
		{Value: "wf_optima", Label: "Księgowanie do Comarch Optima"},
	}
}

const stack = `goroutine 48 [running]:
lifeline/services/engine.(*HTTPStep).Run(0xc000a1e000, {0x1a2b3c0, 0xc0004e2f00})
	/app/services/engine/http_step.go:142 +0x3c5
lifeline/services/engine.(*Engine).runAttempt(0xc0001c4000, {0x1a2b3c0, 0xc0004e2f00}, 0xc000b2a180)
	/app/services/engine/engine.go:311 +0x1f2
lifeline/services/jobs.(*StepWorker).Work(0xc00012a0c0, {0x1a2b3c0, 0xc0004e2f00}, 0xc000418000)
	/app/services/jobs/step.go:58 +0x14b`

func failedExecution() pages.ExecutionVM {
	return pages.ExecutionVM{
		ID: "01J9ZQ4X7M2K8N3P5R6S7T8V9W", ShortID: "01J9ZQ4X", Status: "DLQ",
		WorkflowName: vatName, WorkflowURL: "workflow.html", Trigger: "schedule",
		CorrelationID: "jpk-2025-02-NIP5213456789",
		CreatedAt:     "2025-03-25T07:00:02Z", CreatedAtText: "2025-03-25 07:00:02 UTC",
		FinishedAt: "2025-03-25T07:06:14Z", FinishedAtText: "2025-03-25 07:06:14 UTC",
		Duration: "6m 12s", DLQURL: "dlq-item.html",
		InputJSON: `{"nip":"5213456789","okres":"2025-02","klient":"Piekarnia Zielińscy s.c.","wariant":"JPK_V7M"}`,
		Failure:   &pages.FailureVM{StepID: "submit", StepName: "Wysyłka do e-Deklaracji", ErrorType: "authorization", ErrorCode: "EDEKL_SIG_401", Message: "Bramka e-Deklaracje odrzuciła podpis: certyfikat kwalifikowany wygasł 2025-03-21. Odnów certyfikat w ustawieniach klienta i ponów wysyłkę."},
		Steps: []pages.StepVM{
			{Index: 1, ID: "fetch-ledger", Name: "Pobranie rejestrów VAT", Type: "http", Status: "SUCCEEDED", Attempts: []pages.AttemptVM{
				{Number: 1, Status: "SUCCEEDED", StartedAt: "2025-03-25T07:00:03Z", StartedAtText: "2025-03-25 07:00:03 UTC", FinishedAt: "2025-03-25T07:00:05Z", FinishedAtText: "2025-03-25 07:00:05 UTC", Duration: "1.8s", InputJSON: `{"url":"https://optima.local/api/rejestry?okres=2025-02"}`, OutputJSON: `{"sprzedaz":112,"zakup":87,"suma_netto":"48120.00"}`, IdempotencyKey: "01J9ZQ4X:fetch-ledger:1"},
			}},
			{Index: 2, ID: "build-jpk", Name: "Budowa pliku JPK_V7M", Type: "transform", Status: "SUCCEEDED", Attempts: []pages.AttemptVM{
				{Number: 1, Status: "SUCCEEDED", StartedAt: "2025-03-25T07:00:05Z", StartedAtText: "2025-03-25 07:00:05 UTC", Duration: "0.4s", OutputJSON: `{"plik":"JPK_V7M_2025_02.xml","rozmiar":48213}`},
			}},
			{Index: 3, ID: "submit", Name: "Wysyłka do e-Deklaracji", Type: "http", Status: "FAILED", Attempts: []pages.AttemptVM{
				{Number: 1, Status: "FAILED", StartedAt: "2025-03-25T07:00:06Z", StartedAtText: "2025-03-25 07:00:06 UTC", Duration: "2.1s", ErrorType: "timeout", ErrorCode: "HTTP_TIMEOUT", ErrorMessage: "Brak odpowiedzi z bramki w ciągu 30 s.", IdempotencyKey: "01J9ZQ4X:submit:1"},
				{Number: 2, Status: "FAILED", StartedAt: "2025-03-25T07:00:41Z", StartedAtText: "2025-03-25 07:00:41 UTC", Duration: "1.2s", ErrorType: "external_service", ErrorCode: "HTTP_503", ErrorMessage: "503 Service Unavailable"},
				{Number: 3, Status: "FAILED", StartedAt: "2025-03-25T07:06:12Z", StartedAtText: "2025-03-25 07:06:12 UTC", Duration: "0.9s", ErrorType: "authorization", ErrorCode: "EDEKL_SIG_401", ErrorMessage: "Bramka e-Deklaracje odrzuciła podpis: certyfikat kwalifikowany wygasł 2025-03-21.", StackTrace: stack, InputJSON: `{"url":"https://e-deklaracje.mf.gov.pl/api/Storage/InitUploadSigned","plik":"JPK_V7M_2025_02.xml"}`, OutputJSON: `{"Code":401,"Description":"Podpis nieważny"}`, IdempotencyKey: "01J9ZQ4X:submit:3"},
			}},
			{Index: 4, ID: "fetch-upo", Name: "Pobranie UPO", Type: "http", Status: "SKIPPED"},
		},
	}
}

func liveExecution() pages.ExecutionVM {
	return pages.ExecutionVM{
		ID: "01J9ZQ3A1B2C3D4E5F6G7H8J9K", ShortID: "01J9ZQ3A", Status: "RETRYING",
		WorkflowName: "Dopasowanie faktur z KSeF", WorkflowURL: "workflow.html", Trigger: "webhook",
		CreatedAt: "2025-03-25T06:58:40Z", CreatedAtText: "2025-03-25 06:58:40 UTC", Duration: "1m 40s",
		Live: true, RefreshURL: "execution-live.html",
		InputJSON: `{"nip":"7792233445","od":"2025-03-01","do":"2025-03-24"}`,
		Steps: []pages.StepVM{
			{Index: 1, ID: "ksef-fetch", Name: "Pobranie faktur z KSeF", Type: "http", Status: "RETRYING", NextRetryAt: "2025-03-25T07:00:50Z", NextRetryAtText: "2025-03-25 07:00:50 UTC", Attempts: []pages.AttemptVM{
				{Number: 1, Status: "FAILED", StartedAt: "2025-03-25T06:58:41Z", StartedAtText: "2025-03-25 06:58:41 UTC", Duration: "0.3s", ErrorType: "rate_limit", ErrorCode: "HTTP_429", ErrorMessage: "KSeF API: 429 Too Many Requests (Retry-After: 30)"},
				{Number: 2, Status: "FAILED", StartedAt: "2025-03-25T07:00:20Z", StartedAtText: "2025-03-25 07:00:20 UTC", Duration: "0.2s", ErrorType: "rate_limit", ErrorCode: "HTTP_429", ErrorMessage: "KSeF API: 429 Too Many Requests (Retry-After: 30)"},
			}},
			{Index: 2, ID: "match", Name: "Dopasowanie płatności do faktur", Type: "script", Status: "PENDING"},
			{Index: 3, ID: "post", Name: "Zaksięgowanie dopasowań", Type: "http", Status: "PENDING"},
		},
	}
}

func samplePages() map[string]templ.Component {
	loggedOut := layouts.Page{Title: "Sign in", CSRFToken: "csrf-token"}
	wfRows := []pages.WorkflowRow{
		{ID: "wf_vat", Name: vatName, Description: "Generuje JPK_V7M z rejestrów VAT i wysyła przez e-Deklaracje, potem pobiera UPO.", URL: "workflow.html", Version: 4, Steps: 4, LastStatus: "DLQ", LastRunAt: "2025-03-25T07:00:02Z", LastRunAtText: "2025-03-25 07:00 UTC", Executions: 1284},
		{ID: "wf_bank", Name: "Import wyciągu bankowego (mBank MT940)", Description: "Codziennie o 6:30 pobiera wyciągi MT940 dla 37 klientów.", URL: "workflow.html", Version: 2, Steps: 3, LastStatus: "SUCCEEDED", LastRunAt: "2025-03-25T06:30:00Z", LastRunAtText: "2025-03-25 06:30 UTC", Executions: 5210},
		{ID: "wf_ksef", Name: "Dopasowanie faktur z KSeF", Description: "Pobiera faktury zakupowe z KSeF i paruje je z płatnościami z wyciągu.", URL: "workflow.html", Version: 7, Steps: 3, LastStatus: "RETRYING", LastRunAt: "2025-03-25T06:58:40Z", LastRunAtText: "2025-03-25 06:58 UTC", Executions: 931},
		{ID: "wf_optima", Name: "Księgowanie do Comarch Optima", URL: "workflow.html", Version: 3, Steps: 2, LastStatus: "RUNNING", LastRunAt: "2025-03-25T06:57:11Z", LastRunAtText: "2025-03-25 06:57 UTC", Executions: 2044},
		{ID: "wf_zus", Name: "Przypomnienie o płatności ZUS", Description: "E-mail do klientów 3 dni przed terminem.", URL: "workflow.html", Version: 1, Steps: 2},
	}
	createForm := pages.WorkflowCreateForm{
		Action:     "/workflows",
		Definition: "{\n  \"name\": \"Eksport do KSeF\",\n  \"steps\": [\n    {\"id\": \"fetch\", \"type\": \"http\", \"config\": {\"url\": \"https://optima.local/api\"}},\n    {\"id\": \"send\", \"type\": \"http\", \"config\": {\"url\": \"ftp://ksef\"}}\n  ]\n}",
		Errors: map[string]string{
			"steps[1].config.url":    "must be an http or https URL",
			"steps[1].retry.backoff": "unknown backoff \"linear2\"; use constant, linear or exponential",
		},
		FormError: "The definition has 2 problems. Fix them and submit again.",
	}
	wf := pages.WorkflowVM{
		ID: "wf_vat", Name: vatName, Description: "Generuje JPK_V7M z rejestrów VAT i wysyła przez e-Deklaracje, potem pobiera UPO.",
		Version: "4", CreatedAt: "2024-11-04T09:15:00Z", CreatedAtText: "2024-11-04 09:15 UTC",
		UnknownErrors:  "retried as transient (max 3 attempts)",
		PolicyJSON:     `{"max_attempts":5,"backoff":{"kind":"exponential","initial":"5s","multiplier":2,"max":"5m"},"jitter":0.2,"retry_on":["transient","timeout","rate_limit","external_service"],"unknown_errors":"transient"}`,
		DefinitionJSON: `{"name":"Miesięczna deklaracja VAT (JPK_V7)","version":4,"steps":[{"id":"fetch-ledger","type":"http","config":{"method":"GET","url":"https://optima.local/api/rejestry"}},{"id":"build-jpk","type":"transform"},{"id":"submit","type":"http","timeout":"60s","retry":{"max_attempts":3}},{"id":"fetch-upo","type":"http"}]}`,
		Steps: []pages.StepDefRow{
			{Index: 1, ID: "fetch-ledger", Name: "Pobranie rejestrów VAT", Type: "http", Summary: "GET https://optima.local/api/rejestry?okres={{ input.okres }}", Timeout: "30s", Policy: "5 attempts · 5s ×2 · max 5m", PolicySource: "workflow"},
			{Index: 2, ID: "build-jpk", Name: "Budowa pliku JPK_V7M", Type: "transform", Summary: "JPK_V7M schema 1-0E", Timeout: "10s", Policy: "no retries", PolicySource: "step"},
			{Index: 3, ID: "submit", Name: "Wysyłka do e-Deklaracji", Type: "http", Summary: "POST https://e-deklaracje.mf.gov.pl/api/Storage/InitUploadSigned", Timeout: "60s", Policy: "3 attempts · 30s ×2 · max 10m", PolicySource: "step"},
			{Index: 4, ID: "fetch-upo", Name: "Pobranie UPO", Type: "http", Summary: "GET https://e-deklaracje.mf.gov.pl/api/Storage/Status/{{ steps.submit.output.ref }}", Timeout: "30s", Policy: "5 attempts · 5s ×2 · max 5m", PolicySource: "default"},
		},
		Start:         pages.StartForm{Action: "/workflows/wf_vat/executions", CanStart: true, Input: "{\"nip\": \"5213456789\", \"okres\": \"2025-02\"", Errors: map[string]string{"input": "not valid JSON: unexpected end of input at line 1, column 40"}},
		Recent:        execRows()[:2],
		ExecutionsURL: "executions.html",
		WebhookURL:    "https://lifeline.nowak-ksiegowosc.pl/hooks/wf_vat/9c1e…",
	}
	viewerWF := wf
	viewerWF.Start = pages.StartForm{CanStart: false}
	viewerWF.Recent = nil
	viewerPage := page(vatName, "Workflows", 6)
	viewerPage.Role = "viewer"

	errPage := page("Not found", "", 6)
	flashPage := page("Executions", "Executions", 6)
	flashPage.Flash = "Execution 01J9ZQ5B started."

	return map[string]templ.Component{
		"login":           pages.Login(loggedOut, pages.LoginVM{Action: "/login", Email: "anna.kowalska@nowak-ksiegowosc.pl", Error: "Incorrect email or password.", Next: "/executions"}),
		"workflows":       pages.Workflows(page("Workflows", "Workflows", 6), pages.WorkflowsVM{Rows: wfRows, CanCreate: true, CreateForm: createForm}),
		"workflows-empty": pages.Workflows(page("Workflows", "Workflows", 0), pages.WorkflowsVM{CanCreate: false}),
		"workflow":        pages.Workflow(page(vatName, "Workflows", 6), wf),
		"workflow-viewer": pages.Workflow(viewerPage, viewerWF),
		"executions": pages.Executions(flashPage, pages.ExecutionsVM{
			Filter: pages.ExecutionFilter{Action: "executions.html", Statuses: statusOptions("", "PENDING", "RUNNING", "RETRYING", "SUCCEEDED", "FAILED", "DLQ", "PARTIAL", "SKIPPED"), Workflows: workflowOptions()},
			Table:  pages.ExecutionTable{Rows: execRows(), NextURL: "executions.html?cursor=01J9ZPV5"},
		}),
		"executions-empty": pages.Executions(page("Executions", "Executions", 6), pages.ExecutionsVM{
			Filter: pages.ExecutionFilter{Action: "executions.html", Status: "FAILED", WorkflowID: "wf_zus", Statuses: statusOptions("FAILED", "RUNNING", "FAILED", "DLQ"), Workflows: workflowOptions()},
			Table:  pages.ExecutionTable{Filtered: true},
		}),
		"execution-failed": pages.Execution(page("Execution 01J9ZQ4X", "Executions", 6), failedExecution()),
		"execution-live":   pages.Execution(page("Execution 01J9ZQ3A", "Executions", 6), liveExecution()),
		"dlq": pages.DLQ(page("Dead letters", "Dead letters", 6), pages.DLQVM{
			Filter: pages.DLQFilter{Action: "dlq.html", Statuses: statusOptions("", "pending", "processing", "resolved", "skipped", "expired"), Workflows: workflowOptions(),
				ErrorTypes: statusOptions("", "transient", "permanent", "timeout", "validation", "authorization", "rate_limit", "external_service", "internal", "unknown")},
			Counts: []pages.StatusCount{{Status: "pending", Label: "To handle", Count: "2", URL: "dlq.html?status=pending"}, {Status: "processing", Label: "Processing", Count: "1", URL: "dlq.html?status=processing"},
				{Status: "resolved", Label: "Resolved", Count: "1", URL: "dlq.html?status=resolved"}, {Status: "skipped", Label: "Skipped", Count: "1", URL: "dlq.html?status=skipped"},
				{Status: "expired", Label: "Expired", Count: "1", URL: "dlq.html?status=expired"}},
			Rows:    dlqRows(),
			NextURL: "dlq.html?cursor=dl_39ff00",
		}),
		"dlq-empty": pages.DLQ(page("Dead letters", "Dead letters", 0), pages.DLQVM{
			Filter: pages.DLQFilter{Action: "dlq.html", Statuses: statusOptions("", "pending", "resolved"), Workflows: workflowOptions()},
		}),
		"dlq-item": pages.DLQItem(page("Dead letter", "Dead letters", 6), pages.DLQItemVM{
			Row: dlqRows()[0], ErrorCode: "EDEKL_SIG_401", StackTrace: stack, ManualRetries: 1, ListURL: "dlq.html",
			OriginalInputJSON: `{"nip":"5213456789","okres":"2025-02","klient":"Piekarnia Zielińscy s.c.","wariant":"JPK_V7M"}`,
			StepStatesJSON:    `{"fetch-ledger":{"status":"SUCCEEDED","attempts":1},"build-jpk":{"status":"SUCCEEDED","attempts":1,"output":{"plik":"JPK_V7M_2025_02.xml"}},"submit":{"status":"FAILED","attempts":3,"last_error":"EDEKL_SIG_401"},"fetch-upo":{"status":"SKIPPED"}}`,
		}),
		"error-404": pages.Error(errPage, pages.ErrorVM{Status: 404, Title: "Execution not found", Message: "It may have been deleted after 90 days, or it belongs to another organisation.", BackURL: "executions.html"}),
		"error-500": pages.Error(layouts.Page{Title: "Error"}, pages.ErrorVM{Status: 500, Message: "We could not load this page. The problem has been logged; please try again in a moment."}),
	}
}
