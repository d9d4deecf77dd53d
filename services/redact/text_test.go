package redact_test

import (
	"reflect"
	"testing"

	"lifeline/services/redact"
)

func TestText(t *testing.T) {
	r := redact.New(nil)
	for _, tc := range []struct{ in, want string }{
		{"POST https://bank.example/v1/statements?api_key=abc123&page=2 → HTTP 500", "POST https://bank.example/v1/statements?api_key=[REDACTED]&page=2 → HTTP 500"},
		{"https://x.example/?page=2&access_token=eyJhbGciOi", "https://x.example/?page=2&access_token=[REDACTED]"},
		{"GET /cb?client_secret=s3cr3t;next=/", "GET /cb?client_secret=[REDACTED];next=/"},
		{"redirect=https%3A%2F%2Fa.example%2F%3Fapi_key%3Dzzz9%26page%3D1", "redirect=https%3A%2F%2Fa.example%2F%3Fapi_key%3D[REDACTED]%26page%3D1"},
		{"https://x.example/?Password=hunter22#frag", "https://x.example/?Password=[REDACTED]#frag"},
		{"no query here: token is fine", "no query here: token is fine"},
		{"https://x.example/?page=2&q=token", "https://x.example/?page=2&q=token"},
		{`{"url":"https://x.example/?apikey=v1"}`, `{"url":"https://x.example/?apikey=[REDACTED]"}`},
	} {
		if got := r.Text(tc.in); got != tc.want {
			t.Errorf("Text(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestJSONMasksSecretQueryParameters(t *testing.T) {
	r := redact.New(nil)
	got := string(r.JSON([]byte(`{"url": "https://api.example/x?api_key=abc&page=2", "note": "plain"}`)))
	if want := `{"note":"plain","url":"https://api.example/x?api_key=[REDACTED]&page=2"}`; got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

func TestSecretValuesAndMask(t *testing.T) {
	r := redact.New(nil)
	cfg := map[string]any{
		"url":     "https://bank.example/v1?api_key=QUERYSECRET&page=2",
		"headers": map[string]any{"Authorization": "Bearer CANARY-TOKEN-1", "Accept": "application/json"},
		"body":    map[string]any{"nip": "5260250274", "client": map[string]any{"password": 12345678}, "pin": "12"},
	}
	got := r.SecretValues(cfg)
	want := []string{"Bearer CANARY-TOKEN-1", "CANARY-TOKEN-1", "QUERYSECRET", "12345678"}
	if !reflect.DeepEqual(sortedSet(got), sortedSet(want)) {
		t.Fatalf("SecretValues = %q, want %q", got, want)
	}
}

func sortedSet(s []string) map[string]bool {
	m := map[string]bool{}
	for _, v := range s {
		m[v] = true
	}
	return m
}
