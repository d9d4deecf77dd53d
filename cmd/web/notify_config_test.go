package main

import (
	"strings"
	"testing"
)

func TestConfigSMTP(t *testing.T) {
	cases := []struct {
		name              string
		url, from         string
		ok                bool
		host, tls, user   string
		port              int
		wantFromFragments string
	}{
		{name: "none", ok: true},
		{name: "starttls", url: "smtp://alerts:tajne@mail.example.com:587?tls=starttls", from: "Lifeline <alerts@example.com>", ok: true,
			host: "mail.example.com", tls: "starttls", user: "alerts", port: 587, wantFromFragments: "alerts@example.com"},
		{name: "implicit tls default port", url: "smtp://mail.example.com?tls=tls", ok: true, host: "mail.example.com", tls: "tls", port: 465,
			wantFromFragments: "lifeline@localhost"},
		{name: "none default port", url: "smtp://127.0.0.1?tls=none", ok: true, host: "127.0.0.1", tls: "none", port: 25},
		{name: "default starttls", url: "smtp://mail.example.com", ok: true, host: "mail.example.com", tls: "starttls", port: 587},
		{name: "bad tls", url: "smtp://mail.example.com?tls=maybe"},
		{name: "bad scheme", url: "http://mail.example.com"},
		{name: "bad port", url: "smtp://mail.example.com:99999"},
		{name: "bad from", url: "smtp://mail.example.com", from: "not an address"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{"LIFELINE_SMTP_URL": c.url, "LIFELINE_SMTP_FROM": c.from}
			cfg, err := loadConfig(func(k string) string { return env[k] })
			if (err == nil) != c.ok {
				t.Fatalf("err = %v, want ok=%v", err, c.ok)
			}
			if !c.ok {
				if !strings.Contains(err.Error(), "LIFELINE_SMTP_") {
					t.Fatalf("error does not name the variable: %v", err)
				}
				return
			}
			if c.url == "" {
				if cfg.SMTP != nil {
					t.Fatalf("SMTP without LIFELINE_SMTP_URL: %+v", cfg.SMTP)
				}
				return
			}
			s := cfg.SMTP
			if s == nil || s.Host != c.host || s.TLS != c.tls || s.Port != c.port || s.Username != c.user {
				t.Fatalf("SMTP = %+v", s)
			}
			if c.user != "" && s.Password != "tajne" {
				t.Fatalf("password not read")
			}
			if c.wantFromFragments != "" && !strings.Contains(s.From, c.wantFromFragments) {
				t.Fatalf("From = %q", s.From)
			}
		})
	}
}
