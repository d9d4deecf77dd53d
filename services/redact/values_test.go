package redact_test

import (
	"strings"
	"testing"

	"lifeline/services/redact"
)

func TestMaskerFindsSecretsByValue(t *testing.T) {
	m := redact.NewMasker("Canary-Pass-71xQ", `tok"en\9f3a&x`, "short", "  ", redact.Placeholder)
	cases := []struct {
		name, in, want string
	}{
		{"as it is", `pw is Canary-Pass-71xQ`, `pw is [REDACTED]`},
		{"upper-cased", `CANARY-PASS-71XQ!`, `[REDACTED]!`},
		{"lower-cased, embedded", `xcanary-pass-71xqy`, `x[REDACTED]y`},
		{"inside a JSON text", `{"all":"{\"password\":\"Canary-Pass-71xQ\"}"}`, `{"all":"{\"password\":\"[REDACTED]\"}"}`},
		{"escaped for JSON", `{"t":"tok\"en\\9f3a\u0026x"}`, `{"t":"[REDACTED]"}`},
		{"escaped for JSON, without HTML escaping", `{"t":"tok\"en\\9f3a&x"}`, `{"t":"[REDACTED]"}`},
		{"escaped twice (a JSON text in a JSON string)", `"{\"t\":\"tok\\\"en\\\\9f3a\\u0026x\"}"`, `"{\"t\":\"[REDACTED]\"}"`},
		{"percent-encoded", `?q=tok%22en%5C9f3a%26x&page=2`, `?q=[REDACTED]&page=2`},
		{"shorter than 6 characters is not masked by value", `a short word`, `a short word`},
		{"nothing to mask", `NIP 5260250274`, `NIP 5260250274`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := m.Mask(c.in); got != c.want {
				t.Errorf("Mask(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
	if redact.NewMasker("abc", "12345") != nil {
		t.Error("a masker of values all shorter than 6 characters masks something")
	}
	var none *redact.Masker
	if none.Mask("Canary-Pass-71xQ") != "Canary-Pass-71xQ" || none.Find("x") != nil || string(none.JSON([]byte(`{"a":1}`))) != `{"a":1}` {
		t.Error("a nil masker changed something")
	}
}

func TestMaskerJSONAndValue(t *testing.T) {
	m := redact.NewMasker("Canary-Pass-71xQ", "1234567890")
	got := string(m.JSON([]byte(`{"copy": "Canary-Pass-71xQ", "note": "see canary-pass-71xq", "n": 1234567890, "ok": 5, "Canary-Pass-71xQ": true}`)))
	want := `{"[REDACTED]":true,"copy":"[REDACTED]","n":"[REDACTED]","note":"see [REDACTED]","ok":5}`
	if got != want {
		t.Fatalf("JSON\n got %s\nwant %s", got, want)
	}
	if got := string(m.JSON([]byte(`not json Canary-Pass-71xQ`))); got != `not json [REDACTED]` {
		t.Fatalf("text: %s", got)
	}
	// The longest secret wins where one contains another.
	m2 := redact.NewMasker("secret-value", "secret-value-long")
	if got := m2.Mask("secret-value-long."); got != "[REDACTED]." {
		t.Fatalf("overlap: %s", got)
	}
}

func TestSealedValuesAreShownRedacted(t *testing.T) {
	r := redact.New(nil)
	got := string(r.JSON([]byte(`{"copy": "enc:v1:k1:QUJD", "note": "pw is enc:s1:k1:QUJDREVG.!", "url": "https://x/?api_key=enc:t1:k1:QUJD&page=2", "plain": "enc: not one"}`)))
	want := `{"copy":"[REDACTED]","note":"pw is [REDACTED]!","plain":"enc: not one","url":"https://x/?api_key=[REDACTED]&page=2"}`
	if got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	if strings.Contains(redact.Envelopes("x enc:s1:key-1:abc_-9. y"), "enc:") {
		t.Fatal("a fragment envelope was left")
	}
}

func TestRestoreAsShown(t *testing.T) {
	original := map[string]any{"note": "the password is hunter2-secret", "password": "hunter2-secret", "nip": "1", "list": []any{"a hunter2-secret"}}
	shown := map[string]any{"note": "the password is [REDACTED]", "password": "[REDACTED]", "nip": "1", "list": []any{"a [REDACTED]"}}
	edited := map[string]any{"note": "the password is [REDACTED]", "password": "[REDACTED]", "nip": "2", "list": []any{"a [REDACTED] changed"}}
	got := redact.RestoreAsShown(edited, original, shown).(map[string]any)
	if got["note"] != "the password is hunter2-secret" || got["password"] != "hunter2-secret" || got["nip"] != "2" {
		t.Fatalf("restored %v", got)
	}
	if l := got["list"].([]any); l[0] != "a [REDACTED] changed" {
		t.Fatalf("a string the operator changed was restored: %v", l)
	}
}
