package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/engine"
	"lifeline/services/jobs"
	"lifeline/services/outbound"
	"lifeline/services/redact"
	"lifeline/services/secrets"
	"lifeline/services/steps"
	"lifeline/services/workflows"
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

// Rotation: after a new key is put first, `reseal` re-encrypts everything under it, and the
// old key can then be dropped.
func TestResealRotatesKeys(t *testing.T) {
	t.Parallel()
	for _, dialect := range modeltest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url := modeltest.URL(t, dialect)
			k1, k2 := testKeys(t), strings.Replace(testKeys(t), "test:", "new:", 1)
			sealerOf := func(spec string) secrets.JSONSealer {
				r, err := secrets.ParseRing(spec)
				if err != nil {
					t.Fatal(err)
				}
				return secrets.JSONSealer{Ring: r, IsSecret: redact.New(nil).Match}
			}
			db, err := models.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			db.Sealer = sealerOf(k1)
			reg := steps.Builtins(outbound.NewClient(outbound.Options{}))
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			queue, err := jobs.NewQueue(db, jobs.Config{}, log)
			if err != nil {
				t.Fatal(err)
			}
			eng := engine.New(db, reg, log, engine.Config{Queue: queue, Sealer: db.Sealer})
			org := models.Organization{ID: models.NewID(), Name: "Biuro Klucze"}
			if err := db.Conn(ctx).Create(&org).Error; err != nil {
				t.Fatal(err)
			}
			wf, err := (&workflows.Service{DB: db, Steps: reg}).Create(ctx, org.ID, audit.System, []byte(`{"name": "Rotacja",
			  "steps": [{"id": "t", "type": "transform", "config": {"output": {"apiKey": "LITERAL-KEY-1"}}}]}`))
			if err != nil {
				t.Fatal(err)
			}
			// The input's note repeats the token: sealed where it is found, too.
			ex, _, err := eng.Start(ctx, engine.StartRequest{OrganizationID: org.ID, WorkflowID: wf.ID,
				Input: []byte(`{"apiToken": "INPUT-TOKEN-1", "note": "the token is INPUT-TOKEN-1"}`)})
			if err != nil {
				t.Fatal(err)
			}
			// A compensation stored in clear before compensation configurations were sealed.
			pending, now := models.CompPending, time.Now().UTC()
			comp := models.CompensationAction{ID: models.NewID(), OrganizationID: org.ID, WorkflowID: wf.ID, StepID: "t", CompensationType: "api_call",
				CompensationConfig: models.JSON(`{"compensationType":"api_call","config":{"endpoint":"https://erp.example/undo?api_key=LEGACY-KEY-1","headers":{"Authorization":"Bearer LEGACY-COMP-1"}}}`),
				ExecutionID:        &ex.ID, Status: &pending, Generation: 1, CreatedAt: now, UpdatedAt: now}
			if err := db.Conn(ctx).Create(&comp).Error; err != nil {
				t.Fatal(err)
			}

			// An organization's Slack webhook URL, sealed.
			hook := "https://hooks.slack.com/services/T000/B000/SECRET-HOOK-1"
			if err := db.SaveNotificationSettings(db.Conn(ctx), &models.NotificationSettings{OrganizationID: org.ID, Enabled: true,
				Channels: models.TextList{"slack"}, SlackWebhookURL: hook, DigestThreshold: 10, UpdatedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}

			env := func(k string) string {
				return map[string]string{"DATABASE_URL": url, "LIFELINE_ENCRYPTION_KEYS": k2 + "," + k1}[k]
			}
			var out, errb bytes.Buffer
			if err := run(ctx, []string{"reseal"}, env, &out, &errb); err != nil {
				t.Fatalf("reseal: %v %s", err, errb.String())
			}
			if !strings.Contains(out.String(), "re-encrypted 5 values") {
				t.Fatalf("reseal said %q, want 5 values (definition, its version, the input, the compensation, the webhook URL)", out.String())
			}
			// Only the new key now: everything still opens.
			db.Sealer = sealerOf(k2)
			got, err := db.GetWorkflow(ctx, org.ID, wf.ID)
			if err != nil || !strings.Contains(string(got.Definition), "LITERAL-KEY-1") {
				t.Fatalf("definition under the new key: %s %v", got.Definition, err)
			}
			if def, err := db.WorkflowVersionDef(ctx, org.ID, wf.ID, 1); err != nil || !strings.Contains(string(def), "LITERAL-KEY-1") {
				t.Fatalf("version under the new key: %s %v", def, err)
			}
			if st, err := db.GetNotificationSettings(db.Conn(ctx), org.ID); err != nil || st.SlackWebhookURL != hook {
				t.Fatalf("webhook URL under the new key: %v %v", st, err)
			}
			var stored models.Execution
			db.Conn(ctx).First(&stored, "id = ?", ex.ID)
			plain, err := db.Sealer.Open(stored.Input, "workflow_executions:"+ex.ID+":input")
			if err != nil || !strings.Contains(string(plain), `"the token is INPUT-TOKEN-1"`) || strings.Contains(string(stored.Input), "INPUT-TOKEN-1") ||
				strings.Contains(string(stored.Input), ":test:") {
				t.Fatalf("input under the new key: %s %v", plain, err)
			}
			var storedComp models.CompensationAction
			db.Conn(ctx).First(&storedComp, "id = ?", comp.ID)
			plain, err = db.Sealer.Open(storedComp.CompensationConfig, "compensation_actions:"+comp.ID+":compensation_config")
			if err != nil || !strings.Contains(string(plain), "Bearer LEGACY-COMP-1") || !strings.Contains(string(plain), "api_key=LEGACY-KEY-1") ||
				strings.Contains(string(storedComp.CompensationConfig), "LEGACY-") {
				t.Fatalf("the compensation stored in clear is sealed: %s / %s %v", storedComp.CompensationConfig, plain, err)
			}
		})
	}
}

func TestTrustedProxiesConfig(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string { return map[string]string{"LIFELINE_TRUSTED_PROXIES": v}[k] }
	}
	cfg, err := loadConfig(env(" 10.0.0.0/8, 127.0.0.1 ,::1"))
	if err != nil || len(cfg.TrustedProxies) != 3 || cfg.TrustedProxies[1].String() != "127.0.0.1/32" || cfg.TrustedProxies[2].String() != "::1/128" {
		t.Fatalf("trusted proxies %v %v", cfg.TrustedProxies, err)
	}
	if _, err := loadConfig(env("10.0.0.0/33")); err == nil || !strings.Contains(err.Error(), "LIFELINE_TRUSTED_PROXIES") {
		t.Fatalf("bad CIDR: %v", err)
	}
	if cfg, err := loadConfig(env("")); err != nil || len(cfg.TrustedProxies) != 0 {
		t.Fatalf("default: %v %v", cfg.TrustedProxies, err)
	}
}
