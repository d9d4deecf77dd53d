package secrets_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeline/services/secrets"
)

func ring(t *testing.T, ids ...string) *secrets.Ring {
	t.Helper()
	var specs []string
	for _, id := range ids {
		s, err := secrets.NewKeySpec(id)
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, s)
	}
	r, err := secrets.ParseRing(strings.Join(specs, ","))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func isSecret(k string) bool {
	k = strings.ToLower(k)
	return strings.Contains(k, "token") || strings.Contains(k, "authorization") || strings.Contains(k, "password")
}

func TestParseRing(t *testing.T) {
	good, _ := secrets.NewKeySpec("k2")
	for _, tc := range []struct {
		spec, err string
	}{
		{good, ""},
		{good + ", k1:" + strings.Repeat("A", 43) + "=", ""},
		{"", "no key"},
		{"k1", "want id:base64key"},
		{"k 1:" + strings.Repeat("A", 44), "want id:base64key"},
		{"k1:c2hvcnQ=", "32 bytes"},
		{"k1:!!!", "32 bytes"},
		{good + "," + good, "twice"},
	} {
		_, err := secrets.ParseRing(tc.spec)
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("ParseRing(%.20q): %v, want %q", tc.spec, err, tc.err)
		}
	}
}

func TestSealOpen(t *testing.T) {
	r := ring(t, "k1")
	env, err := r.Seal([]byte("Bearer CANARY"), "step_executions:1:input")
	if err != nil || !secrets.IsSealed(env) || strings.Contains(env, "CANARY") {
		t.Fatalf("seal: %q %v", env, err)
	}
	if got, err := r.Open(env, "step_executions:1:input"); err != nil || string(got) != "Bearer CANARY" {
		t.Fatalf("open: %q %v", got, err)
	}
	for name, tc := range map[string]struct {
		ring     *secrets.Ring
		env, aad string
	}{
		"another row":     {r, env, "step_executions:2:input"},
		"another column":  {r, env, "step_executions:1:output"},
		"another ring":    {ring(t, "k1"), env, "step_executions:1:input"},
		"tampered":        {r, tamper(env), "step_executions:1:input"},
		"not an envelope": {r, "Bearer CANARY", "step_executions:1:input"},
		"unknown key":     {ring(t, "k9"), env, "step_executions:1:input"},
	} {
		if _, err := tc.ring.Open(tc.env, tc.aad); err == nil {
			t.Errorf("%s: opened", name)
		}
	}
}

// tamper changes one character in the middle of the envelope's ciphertext (the last ones
// may carry only base64 padding bits, which decode to the same bytes whatever they are).
func tamper(env string) string {
	i := len(env) - 10
	c := byte('A')
	if env[i] == 'A' {
		c = 'B'
	}
	return env[:i] + string(c) + env[i+1:]
}

func TestRotation(t *testing.T) {
	old := ring(t, "k1")
	env, _ := old.Seal([]byte(`"s3cret"`), "a")
	k1 := strings.SplitN(strings.TrimPrefix(env, secrets.Prefix), ":", 2)[0]
	if k1 != "k1" {
		t.Fatalf("key id %q", k1)
	}
	// The new ring has a new active key and keeps the old one for reading.
	newSpec, _ := secrets.NewKeySpec("k2")
	dir := t.TempDir()
	path := filepath.Join(dir, "keys")
	// Recover the old spec by re-creating rings from files.
	oldR, created, err := secrets.LoadOrCreate(path)
	if err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	b, _ := os.ReadFile(path)
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v", fi.Mode())
	}
	env, _ = oldR.Seal([]byte(`"s3cret"`), "a")
	rotated, err := secrets.ParseRing(newSpec + "," + strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rotated.Open(env, "a"); err != nil || string(got) != `"s3cret"` {
		t.Fatalf("old envelope under the rotated ring: %q %v", got, err)
	}
	re, changed, err := rotated.Reseal(env, "a")
	if err != nil || !changed || !strings.HasPrefix(re, secrets.Prefix+"k2:") {
		t.Fatalf("reseal: %q %v %v", re, changed, err)
	}
	if _, changed, _ := rotated.Reseal(re, "a"); changed {
		t.Fatal("resealed an envelope already under the active key")
	}
	again, created, err := secrets.LoadOrCreate(path)
	if err != nil || created || again.ActiveKeyID() != "k1" {
		t.Fatalf("reload: %v %v", created, err)
	}
}

func TestSealJSON(t *testing.T) {
	r := ring(t, "k1")
	raw := []byte(`{"headers": {"Authorization": "Bearer CANARY", "Accept": "application/json"},
		"body": {"items": [{"apiToken": {"v": 12345678901234567890}}, {"amount": 1234.50}]}, "password": null, "n": 1e300,
		"url": "https://bank.example/v1?page=2&access_token=QUERYCANARY&x=1"}`)
	sealed, err := r.SealJSON(raw, "row", isSecret)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sealed), "CANARY") || strings.Contains(string(sealed), "12345678901234567890") ||
		!strings.Contains(string(sealed), "https://bank.example/v1?page=2&access_token=enc:t1:k1:") || !strings.Contains(string(sealed), "&x=1") {
		t.Fatalf("secret in clear: %s", sealed)
	}
	if !strings.Contains(string(sealed), `"Accept":"application/json"`) || !strings.Contains(string(sealed), `1234.50`) {
		t.Fatalf("non-secret values changed: %s", sealed)
	}
	// Sealing twice does not seal envelopes again.
	twice, _ := r.SealJSON(sealed, "row", isSecret)
	opened, err := r.OpenJSON(twice, "row")
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	_ = json.Unmarshal(raw, &want)
	if err := json.Unmarshal(opened, &got); err != nil {
		t.Fatal(err)
	}
	wb, _ := json.Marshal(want)
	gb, _ := json.Marshal(got)
	if string(wb) != string(gb) || !strings.Contains(string(opened), "12345678901234567890") || !strings.Contains(string(opened), "1e300") {
		t.Fatalf("round trip:\n got %s\nwant %s", opened, raw)
	}
	if _, err := r.OpenJSON(sealed, "other row"); err == nil {
		t.Fatal("opened with another row's aad")
	}
	if out, err := r.OpenJSON([]byte(`{"a": 1}`), "row"); err != nil || string(out) != `{"a": 1}` {
		t.Fatalf("plain JSON: %s %v", out, err)
	}
}

// A secret found by its value, under a plain key and inside longer text, is sealed where it
// is; opening gives the document back; a reseal under a new key keeps it sealed.
func TestSealJSONFound(t *testing.T) {
	k1, _ := secrets.NewKeySpec("k1")
	k2, _ := secrets.NewKeySpec("k2")
	r, err := secrets.ParseRing(k1)
	if err != nil {
		t.Fatal(err)
	}
	isSecret := func(k string) bool { return k == "password" }
	find := func(s string) [][]int {
		var out [][]int
		for i := 0; ; {
			j := strings.Index(strings.ToLower(s[i:]), "canary-9")
			if j < 0 {
				return out
			}
			out = append(out, []int{i + j, i + j + len("canary-9")})
			i += j + len("canary-9")
		}
	}
	raw := []byte(`{"copy":"CANARY-9","note":"it is canary-9, and canary-9.","password":"canary-9","n":1,"list":["x canary-9 y"]}`)
	sealed, err := r.SealJSONFound(raw, "row-1", isSecret, find)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.ToLower(string(sealed)), "canary-9") || !strings.Contains(string(sealed), "enc:s1:k1:") {
		t.Fatalf("a secret is left in clear: %s", sealed)
	}
	if !strings.Contains(string(sealed), `"note":"it is enc:s1:`) || !strings.Contains(string(sealed), `"n":1`) {
		t.Fatalf("the text around the secret is lost: %s", sealed)
	}
	open := func(r *secrets.Ring, b []byte) string {
		t.Helper()
		out, err := r.OpenJSON(b, "row-1")
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	want := `{"copy":"CANARY-9","list":["x canary-9 y"],"n":1,"note":"it is canary-9, and canary-9.","password":"canary-9"}`
	if got := open(r, sealed); got != want {
		t.Fatalf("open\n got %s\nwant %s", got, want)
	}
	if _, err := r.OpenJSON(sealed, "row-2"); err == nil {
		t.Fatal("a fragment opened for another row")
	}
	// Rotation: sealed again under k2, still sealed, still opens; under the active key
	// already, nothing changes.
	r2, err := secrets.ParseRing(k2 + "," + k1)
	if err != nil {
		t.Fatal(err)
	}
	resealed, err := r2.ResealJSON(sealed, "row-1")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.ToLower(string(resealed)), "canary-9") || strings.Contains(string(resealed), ":k1:") {
		t.Fatalf("reseal: %s", resealed)
	}
	if got := open(r2, resealed); got != want {
		t.Fatalf("open after reseal: %s", got)
	}
	again, err := r2.ResealJSON(resealed, "row-1")
	if err != nil || string(again) != string(resealed) {
		t.Fatalf("a reseal under the active key changed the envelopes: %v", err)
	}
}
