package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEncryptionKeysConfig(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	if _, err := loadConfig(env(map[string]string{"LIFELINE_ENCRYPTION_KEYS": "k1:short"})); err == nil ||
		!strings.Contains(err.Error(), "LIFELINE_ENCRYPTION_KEYS") || !strings.Contains(err.Error(), "32 bytes") {
		t.Fatalf("a bad key must stop start-up with a clear message: %v", err)
	}
	dir := t.TempDir()
	cfg, err := loadConfig(env(map[string]string{"DATABASE_URL": filepath.Join(dir, "db", "lifeline.db")}))
	if err != nil || cfg.DataDir != filepath.Join(dir, "db") {
		t.Fatalf("data dir %q %v", cfg.DataDir, err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// Without the variable, a key is generated into the data folder once and reused.
	s1, err := keyRing(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(filepath.Join(dir, "db", "encryption.key"))
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := s1.Seal([]byte(`{"apiToken": "CANARY"}`), "row")
	if err != nil || strings.Contains(string(sealed), "CANARY") {
		t.Fatalf("sealed %s %v", sealed, err)
	}
	s2, err := keyRing(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "db", "encryption.key")); string(again) != string(key) {
		t.Fatal("the key file was replaced")
	}
	if opened, err := s2.Open(sealed, "row"); err != nil || !strings.Contains(string(opened), "CANARY") {
		t.Fatalf("a restart cannot read what was sealed before: %s %v", opened, err)
	}
	// With the variable, its first key seals; the file's key can be kept second for reading.
	cfg.EncryptionKeys = "k2:" + strings.Repeat("QUJD", 10) + "QUI=," + strings.TrimSpace(string(key))
	s3, err := keyRing(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	if opened, err := s3.Open(sealed, "row"); err != nil || !strings.Contains(string(opened), "CANARY") {
		t.Fatalf("rotated ring cannot read the old key's values: %s %v", opened, err)
	}
	if resealed, _ := s3.Seal([]byte(`{"apiToken": "x"}`), "row"); !strings.Contains(string(resealed), "enc:v1:k2:") {
		t.Fatalf("new values must use the first key: %s", resealed)
	}
}
