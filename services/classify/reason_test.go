package classify_test

import (
	"strings"
	"testing"

	"lifeline/services/classify"
)

func TestHTTPErrorReason(t *testing.T) {
	cases := []struct {
		name, body string
		status     int
		want       string
	}{
		{"json error", `{"error": "NIP must have 10 digits"}`, 400, "NIP must have 10 digits (400 Bad Request)"},
		{"json message", `{"message": "Okres rozliczeniowy jest zamknięty", "code": 17}`, 422, "Okres rozliczeniowy jest zamknięty (422 Unprocessable Entity)"},
		{"json detail (problem+json)", `{"type": "about:blank", "title": "Bad Request", "detail": "amount must be positive"}`, 400, "amount must be positive (400 Bad Request)"},
		{"json title only", `{"title": "Invoice already booked"}`, 409, "Invoice already booked (409 Conflict)"},
		{"nested error object", `{"error": {"code": "E1", "message": "token expired"}}`, 401, "token expired (401 Unauthorized)"},
		{"errors list", `{"errors": [{"message": "period is locked"}]}`, 400, "period is locked (400 Bad Request)"},
		{"json string", `"quota exceeded"`, 429, "quota exceeded (429 Too Many Requests)"},
		{"json without message", `{"ok": false}`, 500, "500 Internal Server Error"},
		{"text body first line", "Service temporarily down\nretry later", 503, "Service temporarily down (503 Service Unavailable)"},
		{"html page", "<html><body><h1>502</h1></body></html>", 502, "502 Bad Gateway"},
		{"empty", "", 504, "504 Gateway Timeout"},
		{"unknown status", "", 599, "599"},
		{"field messages under a code", `{"error": "validation", "fields": {"clientNip": "NIP must have 10 digits"}}`, 400, "clientNip: NIP must have 10 digits (400 Bad Request)"},
		{"field messages after a sentence", `{"message": "The declaration is invalid", "errors": {"period": ["is closed"], "amount": "must be positive"}}`, 422,
			"The declaration is invalid: amount: must be positive; period: is closed (422 Unprocessable Entity)"},
		{"a code, then the sentence", `{"error": "gateway_maintenance", "message": "Bramka e-Deklaracje: przerwa techniczna do 08:04:00"}`, 503,
			"Bramka e-Deklaracje: przerwa techniczna do 08:04:00 (503 Service Unavailable)"},
		{"the sentence is a field's", `{"error": "validation", "message": "NIP „526” ma 3 cyfry", "fields": {"clientNip": "NIP „526” ma 3 cyfry"}}`, 400,
			"clientNip: NIP „526” ma 3 cyfry (400 Bad Request)"},
		{"whitespace collapsed", "{\"error\": \"a\\n\\n  b\"}", 400, "a b (400 Bad Request)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := &classify.HTTPError{Method: "POST", URL: "https://vat.example/submit?token=s3cret", StatusCode: c.status, Body: c.body}
			if got := e.Reason(); got != c.want {
				t.Errorf("Reason() = %q, want %q", got, c.want)
			}
		})
	}
	long := &classify.HTTPError{StatusCode: 400, Body: `{"error": "` + strings.Repeat("ż", 400) + `"}`}
	if got := long.Reason(); len(got) > 330 || !strings.HasSuffix(got, "… (400 Bad Request)") {
		t.Errorf("long reason not clipped at a rune boundary: %d bytes, %q", len(got), got[len(got)-30:])
	}
}
