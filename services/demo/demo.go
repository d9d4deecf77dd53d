// Package demo holds the workflows of the demo organization "Biuro Rachunkowe
// Demo" and realistic random inputs for them, for use with the sandbox
// services (package sandbox) when the app runs in demo mode.
//
// Contract:
//
//   - [Definitions] returns one JSON document per workflow, in the engine's
//     definition format, in the order of [Names]. Every http step calls the
//     sandbox with the step's data only: what fails, fails because of the data
//     (a NIP typed wrong) or the sandbox's weather (the office's services going
//     down and coming back, an invoice not yet in KSeF, a used-up quota, an
//     expired KSeF token; see package sandbox, Options.Office), never because
//     the input asked to. The KSeF step reads the organization's credential
//     [CredentialKSeF] ({{ credentials.ksefToken }}), which the demo seeds with
//     the office's expired token (sandbox.ExpiredKSeFToken).
//   - [Input] returns a fresh input map for a workflow named in [Names], and
//     nil for any other name: one of the office's clients, always with the
//     same NIP and account, except that [ShareTypo] of the inputs carry the
//     NIP typed wrong. The result depends only on the draws from rnd.
package demo

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Organization is the name of the demo organization.
const Organization = "Biuro Rachunkowe Demo"

// Workflow names, as shown in the app.
const (
	BankImport = "Import wyciągu bankowego i księgowanie"
	VAT        = "Miesięczna deklaracja VAT (JPK_V7)"
	Payroll    = "Eksport listy płac"
	KSeF       = "Pobranie faktur zakupowych z KSeF"
)

// Names returns the demo workflow names in the order of [Definitions]. The
// slice is new on every call.
func Names() []string {
	return []string{BankImport, VAT, Payroll, KSeF}
}

// Definitions returns the demo workflow definitions; sandboxBase is e.g.
// "http://127.0.0.1:8080/sandbox" (a trailing slash is ignored).
func Definitions(sandboxBase string) []json.RawMessage {
	defs := workflows(strings.TrimRight(sandboxBase, "/"))
	out := make([]json.RawMessage, 0, len(defs))
	for _, d := range defs {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(d); err != nil {
			// The definitions are static Go values; failing here is a bug.
			panic("demo: encoding definition " + d.Name + ": " + err.Error())
		}
		out = append(out, json.RawMessage(bytes.TrimSpace(buf.Bytes())))
	}
	return out
}

// The definition format, as the engine parses it. Zero values are omitted,
// except maxRetries, which every policy here sets.
type definition struct {
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Settings    *settings `json:"settings,omitempty"`
	Steps       []step    `json:"steps"`
}

type settings struct {
	RetryPolicy   *retryPolicy `json:"retryPolicy,omitempty"`
	UnknownErrors string       `json:"unknownErrors,omitempty"`
	Subject       string       `json:"subject,omitempty"`
	// CircuitBreaker applies to every step without its own.
	CircuitBreaker *circuitBreaker `json:"circuitBreaker,omitempty"`
	// RollbackOnFailure: the compensations of the completed steps run when a step fails for good.
	RollbackOnFailure bool `json:"rollbackOnFailure,omitempty"`
	// OnFailure hands the failures of every step to a handler step.
	OnFailure *onFailure `json:"onFailure,omitempty"`
	// MovesMoney: an accountant's edited input waits for an admin's approval.
	MovesMoney bool `json:"movesMoney,omitempty"`
	// What each execution is about: the client, the period, the amount and the filing
	// obligation whose due date follows from the period.
	Client     string `json:"client,omitempty"`
	Period     string `json:"period,omitempty"`
	Amount     string `json:"amount,omitempty"`
	Obligation string `json:"obligation,omitempty"`
}

type onFailure struct {
	ByErrorType  map[string]string `json:"byErrorType,omitempty"`
	InputMapping map[string]any    `json:"inputMapping,omitempty"`
}

// tolerant is the breaker of the demo's steps other than the bank import: the sandbox's
// passing failures (a busy ledger or mail server, the tax gateway's break) must not trip them
// every minute; the bank's outage does.
var tolerant = &circuitBreaker{FailureThreshold: 20, ResetTimeoutMs: 30_000, HalfOpenRequests: 3}

// subject titles every demo execution with its client and period.
const subject = "{{ input.clientName }} · {{ input.period }}"

// The client of every demo execution is its client's name (not its NIP, which the demo's
// failures sometimes get wrong), and its period the input's.
const (
	aboutClient = "{{ input.clientName }}"
	aboutPeriod = "{{ input.period }}"
)

type retryPolicy struct {
	MaxRetries        int      `json:"maxRetries"`
	InitialDelayMs    int      `json:"initialDelayMs,omitempty"`
	MaxDelayMs        int      `json:"maxDelayMs,omitempty"`
	BackoffMultiplier float64  `json:"backoffMultiplier,omitempty"`
	JitterRatio       float64  `json:"jitterRatio,omitempty"`
	BackoffType       string   `json:"backoffType,omitempty"`
	CustomScheduleMs  []int    `json:"customScheduleMs,omitempty"`
	RetryOnErrors     []string `json:"retryOnErrors,omitempty"`
	NoRetryOnErrors   []string `json:"noRetryOnErrors,omitempty"`
}

type step struct {
	ID          string       `json:"id"`
	Name        string       `json:"name"`
	Type        string       `json:"type"`
	Config      any          `json:"config"`
	RetryPolicy *retryPolicy `json:"retryPolicy,omitempty"`
	TimeoutMs   int          `json:"timeoutMs,omitempty"`
	// CircuitBreaker is the step's breaker (seed 000's keys).
	CircuitBreaker *circuitBreaker `json:"circuitBreaker,omitempty"`
	// Compensation undoes the step in a rollback.
	Compensation *compensation `json:"compensation,omitempty"`
	// Handler: the step runs only when a failure is handed to it.
	Handler bool `json:"handler,omitempty"`
	// FallbackStepID: a handler step that runs instead of this one while its breaker is open.
	FallbackStepID string `json:"fallbackStepId,omitempty"`
	// PostsToPeriod: the step posts to the ledger or files a declaration for the
	// execution's period; it does not run while the office has that period closed.
	PostsToPeriod bool `json:"postsToPeriod,omitempty"`
}

type compensation struct {
	CompensationType string         `json:"compensationType"`
	Config           map[string]any `json:"config"`
}

// undo is the compensation of a bank-import step: the sandbox's /undo/<what>, with the
// reference from the step's output.
func undo(base, what string, body map[string]any) *compensation {
	return &compensation{CompensationType: "api_call", Config: map[string]any{"method": "POST", "endpoint": base + "/undo/" + what, "body": body}}
}

type circuitBreaker struct {
	FailureThreshold int `json:"failureThreshold"`
	ResetTimeoutMs   int `json:"resetTimeoutMs"`
	HalfOpenRequests int `json:"halfOpenRequests"`
}

type httpConfig struct {
	Method    string            `json:"method"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers,omitempty"`
	Body      any               `json:"body,omitempty"`
	TimeoutMs int               `json:"timeoutMs,omitempty"`
}

type transformConfig struct {
	Output any `json:"output"`
}

type delayConfig struct {
	Ms int `json:"ms"`
}

// httpStep builds a POST to one of the sandbox's services.
func httpStep(base, id, name, path string, body map[string]any, requestTimeoutMs int) step {
	return step{
		ID:   id,
		Name: name,
		Type: "http",
		Config: httpConfig{
			Method:    "POST",
			URL:       base + path,
			Headers:   map[string]string{"Content-Type": "application/json"},
			Body:      body,
			TimeoutMs: requestTimeoutMs,
		},
		TimeoutMs: requestTimeoutMs + 5000,
	}
}

func workflows(base string) []definition {
	return []definition{bankImport(base), vat(base), payroll(base), ksef(base)}
}

func bankImport(base string) definition {
	importStep := httpStep(base, "import_statement", "Import wyciągu bankowego", "/bank/statements/import", map[string]any{
		"clientNip": "{{ input.clientNip }}",
		"account":   "{{ input.account }}",
		"period":    "{{ input.period }}",
	}, 10_000)
	importStep.RetryPolicy = &retryPolicy{MaxRetries: 3, InitialDelayMs: 1000, MaxDelayMs: 8000, BackoffMultiplier: 2}
	// The bank's API goes down for a minute every three (the sandbox's weather): its breaker
	// opens and, while it is open, the statement is imported from the file the bank e-mailed
	// (from_file) instead of hammering the API; it closes when the bank is back.
	importStep.CircuitBreaker = &circuitBreaker{FailureThreshold: 5, ResetTimeoutMs: 20_000, HalfOpenRequests: 1}
	importStep.FallbackStepID = "from_file"
	fromFile := httpStep(base, "from_file", "Import z pliku od banku", "/bank/statements/from-file", map[string]any{
		"clientNip": "{{ input.clientNip }}",
		"account":   "{{ input.account }}",
		"period":    "{{ input.period }}",
	}, 10_000)
	fromFile.Handler = true
	fromFile.RetryPolicy = &retryPolicy{MaxRetries: 2, InitialDelayMs: 1000, MaxDelayMs: 5000, BackoffMultiplier: 2}

	match := httpStep(base, "match_invoices", "Dopasowanie transakcji do faktur", "/invoices/match", map[string]any{
		"statementId":  "{{ steps.import_statement.output.statementId }}",
		"transactions": "{{ steps.import_statement.output.transactions }}",
	}, 10_000)
	match.RetryPolicy = &retryPolicy{MaxRetries: 3, InitialDelayMs: 1500, MaxDelayMs: 10_000, BackoffMultiplier: 2, JitterRatio: 0.1}

	post := httpStep(base, "post_ledger", "Księgowanie w dzienniku", "/ledger/postings", map[string]any{
		"statementId": "{{ steps.import_statement.output.statementId }}",
		"matched":     "{{ steps.match_invoices.output.matched }}",
	}, 15_000)
	post.RetryPolicy = &retryPolicy{MaxRetries: 2, InitialDelayMs: 2000, MaxDelayMs: 10_000, BackoffType: "linear"}
	post.PostsToPeriod = true

	// When a step fails for good the completed ones are undone, last first (3, 2, 1).
	importStep.Compensation = undo(base, "statement", map[string]any{"statementId": "{{ step.output.statementId }}"})
	match.Compensation = undo(base, "match", map[string]any{"statementId": "{{ steps.import_statement.output.statementId }}"})
	post.Compensation = undo(base, "posting", map[string]any{"postingId": "{{ step.output.postingId }}"})
	report := httpStep(base, "send_report", "Wysłanie raportu do klienta", "/mail/send", map[string]any{
		"to":      "{{ input.clientEmail }}",
		"subject": "Wyciąg {{ input.period }} zaksięgowany – {{ input.clientName }}",
	}, 10_000)

	return definition{
		Name: BankImport,
		Description: "Pobiera wyciąg z rachunku bankowego klienta za okres, dopasowuje transakcje " +
			"do faktur, księguje dopasowane pozycje w dzienniku, wysyła raport klientowi i zapisuje " +
			"podsumowanie. Gdy API banku nie działa (bezpiecznik otwarty), wyciąg jest importowany z pliku " +
			"przysłanego przez bank. Gdy krok zawiedzie na dobre, wcześniejsze kroki są wycofywane.",
		// It posts to the ledger: an accountant's edited input is approved by an admin first.
		Settings: &settings{UnknownErrors: "retry", Subject: subject, CircuitBreaker: tolerant, RollbackOnFailure: true, MovesMoney: true,
			Client: aboutClient, Period: aboutPeriod},
		Steps: []step{importStep, match, post, report, {
			ID:   "summary",
			Name: "Podsumowanie",
			Type: "transform",
			Config: transformConfig{Output: map[string]any{
				"client":       "{{ input.clientName }}",
				"clientNip":    "{{ input.clientNip }}",
				"period":       "{{ input.period }}",
				"statementId":  "{{ steps.import_statement.output.statementId }}",
				"transactions": "{{ steps.import_statement.output.transactions }}",
				"balance":      "{{ round((steps.import_statement.output.totalCredits - steps.import_statement.output.totalDebits) * 100) / 100 }}",
				"currency":     "{{ steps.import_statement.output.currency }}",
				"matched":      "{{ steps.match_invoices.output.matched }}",
				"unmatched":    "{{ steps.match_invoices.output.unmatched }}",
				"matchPercent": "{{ round(steps.match_invoices.output.matchRate * 1000) / 10 }}",
				"postingId":    "{{ steps.post_ledger.output.postingId }}",
				"entries":      "{{ steps.post_ledger.output.entries }}",
			}},
		}, fromFile},
	}
}

func vat(base string) definition {
	validate := httpStep(base, "validate_jpk", "Walidacja JPK_V7", "/vat/jpk-v7/validate", map[string]any{
		"clientNip":     "{{ input.clientNip }}",
		"period":        "{{ input.period }}",
		"salesTotal":    "{{ input.salesTotal }}",
		"purchaseTotal": "{{ input.purchaseTotal }}",
	}, 10_000)

	submit := httpStep(base, "submit_jpk", "Wysyłka JPK_V7 do urzędu skarbowego", "/vat/jpk-v7/submit", map[string]any{
		"clientNip":     "{{ input.clientNip }}",
		"period":        "{{ input.period }}",
		"salesTotal":    "{{ input.salesTotal }}",
		"purchaseTotal": "{{ input.purchaseTotal }}",
		"vatDue":        "{{ steps.validate_jpk.output.vatDue }}",
	}, 20_000)
	submit.PostsToPeriod = true

	mail := httpStep(base, "notify_client", "Powiadomienie klienta e-mailem", "/mail/send", map[string]any{
		"to":      "{{ input.clientEmail }}",
		"subject": "JPK_V7 za {{ input.period }} przyjęty – {{ input.clientName }}",
		"body": "Dzień dobry, deklaracja JPK_V7M za okres {{ input.period }} została przyjęta. " +
			"Numer referencyjny: {{ steps.submit_jpk.output.referenceNumber }}. " +
			"VAT do zapłaty: {{ steps.validate_jpk.output.vatDue }} PLN. Pozdrawiamy, " + Organization + ".",
	}, 10_000)
	// Mail is harmless to repeat: retry it more often and on unknown errors too.
	mail.RetryPolicy = &retryPolicy{
		MaxRetries:    5,
		RetryOnErrors: []string{"transient", "timeout", "rate_limit", "external_service", "unknown"},
	}

	// A file the tax office refuses on validation (a wrong NIP, say) goes back to whoever
	// prepared it, as a task with the reason, instead of to the DLQ: the execution ends
	// partly done. Other failures still go to the DLQ.
	back := httpStep(base, "return_to_preparer", "Zwrot do poprawy przygotowującemu", "/tasks", map[string]any{
		"title":      "{{ mapped.title }}",
		"reason":     "{{ error.message }}",
		"failedStep": "{{ failedStep.id }}",
		"assignee":   "Przygotowujący deklaracje",
	}, 10_000)
	back.Handler = true

	return definition{
		Name: VAT,
		Description: "Waliduje miesięczny plik JPK_V7M klienta, wysyła go do urzędu skarbowego " +
			"i powiadamia klienta o numerze referencyjnym i kwocie VAT do zapłaty. Deklarację z VAT " +
			"do zapłaty powyżej 50 000 zł przed wysyłką zatwierdza wspólnik. Plik odrzucony " +
			"z powodu błędnych danych wraca do poprawy jako zadanie dla przygotowującego.",
		Settings: &settings{
			Subject: subject,
			Client:  aboutClient,
			Period:  aboutPeriod,
			// The VAT to pay for the month; the return is due on the 25th of the next one.
			Amount:         "{{ input.vatDue }}",
			Obligation:     "JPK_V7M",
			CircuitBreaker: tolerant,
			OnFailure: &onFailure{
				ByErrorType: map[string]string{"validation": "return_to_preparer"},
				InputMapping: map[string]any{
					"title":  "Popraw JPK_V7 za {{ input.period }} – {{ input.clientName }}",
					"reason": "{{ error.message }}",
				},
			},
			RetryPolicy: &retryPolicy{
				MaxRetries:        4,
				InitialDelayMs:    2000,
				MaxDelayMs:        30_000,
				BackoffMultiplier: 2,
				JitterRatio:       0.2,
				BackoffType:       "exponential",
				NoRetryOnErrors:   []string{"validation", "authorization", "permanent"},
			},
			UnknownErrors: "retry",
		},
		Steps: []step{validate, partnerApproval(), submit, mail, back},
	}
}

func payroll(base string) definition {
	export := httpStep(base, "export_payroll", "Eksport listy płac do banku", "/payroll/export", map[string]any{
		"clientNip": "{{ input.clientNip }}",
		"period":    "{{ input.period }}",
		"employees": "{{ input.employees }}",
	}, 15_000)
	export.RetryPolicy = &retryPolicy{MaxRetries: 4, InitialDelayMs: 3000, BackoffType: "fixed"}

	mail := httpStep(base, "notify_accountant", "Powiadomienie księgowej", "/mail/send", map[string]any{
		"to":      "{{ input.accountantEmail }}",
		"subject": "Lista płac {{ input.period }} – {{ input.clientName }}: plik {{ steps.export_payroll.output.fileId }}",
	}, 10_000)
	mail.RetryPolicy = &retryPolicy{MaxRetries: 3, BackoffType: "custom", CustomScheduleMs: []int{1000, 5000, 15_000}}

	return definition{
		Name: Payroll,
		Description: "Eksportuje listę płac klienta za okres do pliku przelewów, czeka na jego " +
			"przetworzenie i powiadamia księgową prowadzącą.",
		Settings: &settings{
			Subject: subject,
			Client:  aboutClient,
			Period:  aboutPeriod,
			// The salaries the transfer file pays: held up while the export fails.
			Amount:         "{{ input.payrollTotal }}",
			CircuitBreaker: tolerant,
			RetryPolicy:    &retryPolicy{MaxRetries: 3, InitialDelayMs: 1000, MaxDelayMs: 10_000, BackoffMultiplier: 2},
			UnknownErrors:  "retry",
		},
		Steps: []step{
			export,
			{ID: "wait_for_bank", Name: "Oczekiwanie na przetworzenie pliku", Type: "delay", Config: delayConfig{Ms: 2000}},
			mail,
			{ID: "summary", Name: "Podsumowanie", Type: "transform", Config: transformConfig{Output: map[string]any{
				"client":    "{{ input.clientName }}",
				"period":    "{{ input.period }}",
				"fileId":    "{{ steps.export_payroll.output.fileId }}",
				"rows":      "{{ steps.export_payroll.output.rows }}",
				"messageId": "{{ steps.notify_accountant.output.messageId }}",
			}}},
		},
	}
}

// CredentialKSeF is the name of the organization credential the KSeF step sends as its
// bearer token.
const CredentialKSeF = "ksefToken"

func ksef(base string) definition {
	query := httpStep(base, "fetch_invoices", "Pobranie faktur z KSeF", "/ksef/invoices/query", map[string]any{
		"clientNip": "{{ input.clientNip }}",
		"period":    "{{ input.period }}",
	}, 15_000)
	query.Config = httpConfig{Method: "POST", URL: base + "/ksef/invoices/query", TimeoutMs: 15_000, Body: query.Config.(httpConfig).Body,
		Headers: map[string]string{"Content-Type": "application/json", "Authorization": "Bearer {{ credentials." + CredentialKSeF + " }}"}}
	return definition{
		Name: KSeF,
		Description: "Pobiera z Krajowego Systemu e-Faktur faktury zakupowe klienta za okres, " +
			"uwierzytelniając się tokenem KSeF biura (dane dostępowe organizacji), i zapisuje podsumowanie.",
		Settings: &settings{
			Subject:        subject,
			Client:         aboutClient,
			Period:         aboutPeriod,
			CircuitBreaker: tolerant,
			RetryPolicy: &retryPolicy{MaxRetries: 3, InitialDelayMs: 2000, MaxDelayMs: 20_000, BackoffMultiplier: 2,
				NoRetryOnErrors: []string{"validation", "authorization", "permanent"}},
			UnknownErrors: "retry",
		},
		Steps: []step{query, {ID: "summary", Name: "Podsumowanie", Type: "transform", Config: transformConfig{Output: map[string]any{
			"client":     "{{ input.clientName }}",
			"period":     "{{ input.period }}",
			"invoices":   "{{ steps.fetch_invoices.output.invoices }}",
			"totalGross": "{{ steps.fetch_invoices.output.totalGross }}",
			"queryId":    "{{ steps.fetch_invoices.output.queryId }}",
		}}}},
	}
}
