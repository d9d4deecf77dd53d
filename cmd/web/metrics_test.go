package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// freeAddr returns a loopback address with a port nobody listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// get polls url until the server answers (it is starting), and returns the answer.
func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			return res.StatusCode, string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// serveWith runs `lifeline serve` with env until the test ends.
func serveWith(t *testing.T, env map[string]string) {
	t.Helper()
	env["DATABASE_URL"] = filepath.Join(t.TempDir(), "l.db")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve"}, func(k string) string { return env[k] }, io.Discard, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
}

// TestMetricsSeparateAddress: with LIFELINE_METRICS_ADDR, /metrics is served on that
// listener without a token, and not on the app's address.
func TestMetricsSeparateAddress(t *testing.T) {
	t.Parallel()
	app, met := freeAddr(t), freeAddr(t)
	serveWith(t, map[string]string{"LIFELINE_ADDR": app, "LIFELINE_METRICS_ADDR": met})
	if status, _ := get(t, "http://"+app+"/healthz", ""); status != http.StatusOK {
		t.Fatalf("app healthz: %d", status)
	}
	status, body := get(t, "http://"+met+"/metrics", "")
	if status != http.StatusOK || !strings.Contains(body, "go_goroutines") || !strings.Contains(body, `lifeline_http_requests_total{code="200",host="",method="GET",url="/healthz"}`) {
		t.Fatalf("metrics address: %d\n%s", status, body)
	}
	if status, body := get(t, "http://"+app+"/metrics", ""); strings.Contains(body, "go_goroutines") {
		t.Fatalf("the app's address serves the metrics too: %d", status)
	}
}

// TestMetricsToken: with LIFELINE_METRICS_TOKEN alone, the app's /metrics needs the token.
func TestMetricsToken(t *testing.T) {
	t.Parallel()
	app := freeAddr(t)
	const token = "scrape-token-0123456789"
	serveWith(t, map[string]string{"LIFELINE_ADDR": app, "LIFELINE_METRICS_TOKEN": token})
	if status, body := get(t, "http://"+app+"/metrics", ""); status != http.StatusUnauthorized || strings.Contains(body, "go_goroutines") {
		t.Fatalf("without the token: %d", status)
	}
	if status, body := get(t, "http://"+app+"/metrics", token); status != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("with the token: %d", status)
	}
}

// TestMetricsConfig: the metrics and tracing settings are checked when read.
func TestMetricsConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		fail string
	}{
		{map[string]string{"LIFELINE_METRICS_TOKEN": "short"}, "LIFELINE_METRICS_TOKEN"},
		{map[string]string{"LIFELINE_METRICS_ADDR": "9090"}, "LIFELINE_METRICS_ADDR"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{map[string]string{"LIFELINE_METRICS_ADDR": "127.0.0.1:9090", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, ""},
		{map[string]string{}, ""},
	} {
		c, err := loadConfig(func(k string) string { return tc.env[k] })
		switch {
		case tc.fail != "" && (err == nil || !strings.Contains(err.Error(), tc.fail)):
			t.Errorf("%v: %v, want an error about %s", tc.env, err, tc.fail)
		case tc.fail == "" && err != nil:
			t.Errorf("%v: %v", tc.env, err)
		case tc.fail == "" && c.MetricsOn() != (tc.env["LIFELINE_METRICS_ADDR"] != ""):
			t.Errorf("%v: metrics on = %v", tc.env, c.MetricsOn())
		}
	}
}
