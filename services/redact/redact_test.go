package redact

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return v
}

func TestValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		keys []string
		in   string
		want string
	}{
		{"flat defaults", nil,
			`{"user":"bob","password":"hunter2","count":3}`,
			`{"user":"bob","password":"[REDACTED]","count":3}`},
		{"case-insensitive and dashes", nil,
			`{"X-Api-Key":"k","Authorization":"Bearer t","PASSWORD":"p","Content-Type":"application/json"}`,
			`{"X-Api-Key":"[REDACTED]","Authorization":"[REDACTED]","PASSWORD":"[REDACTED]","Content-Type":"application/json"}`},
		{"substring keys", nil,
			`{"bankIBAN":"DE00","db_password":"x","access_token":"a","refresh_token":"r","client_secret":"c","apiKey":"k","Client-Secret":"s"}`,
			`{"bankIBAN":"[REDACTED]","db_password":"[REDACTED]","access_token":"[REDACTED]","refresh_token":"[REDACTED]","client_secret":"[REDACTED]","apiKey":"[REDACTED]","Client-Secret":"[REDACTED]"}`},
		{"nested arrays", nil,
			`{"accounts":[{"iban":"DE1","name":"a"},[{"token":"t"}],"token"],"meta":{"headers":{"Authorization":"x","Accept":"*/*"}}}`,
			`{"accounts":[{"iban":"[REDACTED]","name":"a"},[{"token":"[REDACTED]"}],"token"],"meta":{"headers":{"Authorization":"[REDACTED]","Accept":"*/*"}}}`},
		{"whole subtree replaced", nil,
			`{"secrets":{"a":1,"b":[1,2]},"password":null,"token":42}`,
			`{"secrets":"[REDACTED]","password":"[REDACTED]","token":"[REDACTED]"}`},
		{"non-secret untouched; substring match is deliberate (tokenizer)", nil,
			`{"name":"n","tokenizer":"x","description":"my password is 123","items":[1,"two",null,true]}`,
			`{"name":"n","tokenizer":"[REDACTED]","description":"my password is 123","items":[1,"two",null,true]}`},
		{"custom keys replace defaults", []string{"SSN", " x-internal "},
			`{"ssn":"1","customer_ssn":"2","X-Internal-Id":"3","password":"kept"}`,
			`{"ssn":"[REDACTED]","customer_ssn":"[REDACTED]","X-Internal-Id":"[REDACTED]","password":"kept"}`},
		{"blank custom keys fall back to defaults", []string{"", "  "},
			`{"password":"p","name":"n"}`,
			`{"password":"[REDACTED]","name":"n"}`},
		{"scalar root", nil, `"password"`, `"password"`},
		{"array root", nil, `[{"secret":1}]`, `[{"secret":"[REDACTED]"}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := New(tt.keys)
			in := decode(t, tt.in)
			before, _ := json.Marshal(in)
			got := r.Value(in)
			if want := decode(t, tt.want); !reflect.DeepEqual(got, want) {
				t.Errorf("Value = %#v\nwant %#v", got, want)
			}
			if after, _ := json.Marshal(in); string(after) != string(before) {
				t.Errorf("input mutated:\n%s\n%s", before, after)
			}
		})
	}
}

func TestValueHeaders(t *testing.T) {
	t.Parallel()
	r := New(nil)
	h := http.Header{"Authorization": {"Bearer t"}, "X-Api-Key": {"k"}, "Accept": {"a", "b"}}
	got, ok := r.Value(h).(http.Header)
	if !ok {
		t.Fatalf("Value(http.Header) returned %T", r.Value(h))
	}
	want := http.Header{"Authorization": {Placeholder}, "X-Api-Key": {Placeholder}, "Accept": {"a", "b"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("headers = %v, want %v", got, want)
	}
	got["Accept"][0] = "changed"
	if h.Get("Authorization") != "Bearer t" || h["Accept"][0] != "a" {
		t.Errorf("input header mutated or aliased: %v", h)
	}

	m := map[string]string{"Cookie-Token": "c", "Host": "h"}
	if got := r.Value(m); !reflect.DeepEqual(got, map[string]string{"Cookie-Token": Placeholder, "Host": "h"}) {
		t.Errorf("map[string]string = %v", got)
	}
	if m["Cookie-Token"] != "c" {
		t.Error("map[string]string input mutated")
	}
	mm := map[string][]string{"refresh-token": {"x"}}
	if got := r.Value(mm); !reflect.DeepEqual(got, map[string][]string{"refresh-token": {Placeholder}}) {
		t.Errorf("map[string][]string = %v", got)
	}
}

func TestJSON(t *testing.T) {
	t.Parallel()
	r := New(nil)
	tests := []struct {
		name, in, want string
	}{
		{"redacts and compacts", `{ "b": 1, "a": {"Password": "p"} }`, `{"a":{"Password":"[REDACTED]"},"b":1}`},
		{"numbers kept exactly", `{"n": 12345678901234567890, "f": 1.50}`, `{"f":1.50,"n":12345678901234567890}`},
		{"no html escaping", `{"s": "<a&b>"}`, `{"s":"<a&b>"}`},
		{"invalid unchanged", `{"password": `, `{"password": `},
		{"trailing data unchanged", `{"password":"p"} {}`, `{"password":"p"} {}`},
		{"not json unchanged", `password=hunter2`, `password=hunter2`},
		{"empty unchanged", ``, ``},
		{"array", `[{"token":"t"}, 1]`, `[{"token":"[REDACTED]"},1]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := []byte(tt.in)
			if got := r.JSON(in); string(got) != tt.want {
				t.Errorf("JSON(%s) = %s, want %s", tt.in, got, tt.want)
			}
			if string(in) != tt.in {
				t.Errorf("input mutated: %s", in)
			}
		})
	}
}

func TestParseKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  ", nil},
		{"password", []string{"password"}},
		{" password , X-Secret,,token ,", []string{"password", "X-Secret", "token"}},
	}
	for _, tt := range tests {
		if got := ParseKeys(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseKeys(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestMatchAndZeroValue(t *testing.T) {
	t.Parallel()
	var zero Redactor
	for _, k := range []string{"password", "Access-Token", "client_secret", "APIKEY", "bankIban"} {
		if !zero.Match(k) || !New(nil).Match(k) {
			t.Errorf("%q should match the defaults", k)
		}
	}
	for _, k := range []string{"name", "amount", "pass", "key", "api"} {
		if zero.Match(k) {
			t.Errorf("%q should not match", k)
		}
	}
}

func TestRestore(t *testing.T) {
	original := map[string]any{"nip": "1234567890", "apiKey": "s3cret-key", "bank": map[string]any{"password": "hunter22", "iban": "PL61"},
		"tokens": []any{"t-one", "t-two"}}
	cases := []struct {
		name   string
		edited any
		want   any
	}{
		{"masked values keep the stored ones", map[string]any{"nip": "0987654321", "apiKey": Placeholder,
			"bank": map[string]any{"password": Placeholder, "iban": "PL62"}},
			map[string]any{"nip": "0987654321", "apiKey": "s3cret-key", "bank": map[string]any{"password": "hunter22", "iban": "PL62"}}},
		{"a changed secret is the new value", map[string]any{"apiKey": "new-key"}, map[string]any{"apiKey": "new-key"}},
		{"arrays by position", map[string]any{"tokens": []any{Placeholder, "t-new", Placeholder}},
			map[string]any{"tokens": []any{"t-one", "t-new", Placeholder}}},
		{"a placeholder with nothing behind it stays", map[string]any{"other": Placeholder}, map[string]any{"other": Placeholder}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Restore(c.edited, original); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Restore = %#v, want %#v", got, c.want)
			}
		})
	}
}

func TestWebhookURLsAreAlwaysSecret(t *testing.T) {
	for _, r := range []*Redactor{New(nil), New([]string{"x-custom"})} {
		if !r.Match("slackWebhookUrl") || !r.Match("teamsWebhookUrl") || !r.Match("webhook_url") {
			t.Errorf("webhook URLs are not secret with these keys")
		}
	}
	if New([]string{"x-custom"}).Match("password") {
		t.Error("configured keys replace the defaults")
	}
}
