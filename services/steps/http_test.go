package steps_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"lifeline/services/classify"
	"lifeline/services/steps"
)

type countingTransport struct{ calls atomic.Int32 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	return nil, errors.New("unexpected request to " + r.URL.String())
}

// A URL whose scheme is not http or https (possible when it comes from a template) and a
// header that a template filled with CR/LF fail for good, without a request: retrying
// cannot change them.
func TestHTTPRunRefusesWhatNoRetryCanFix(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		config map[string]any
		code   string
	}{
		{"file", map[string]any{"url": "file:///etc/passwd"}, "URL_SCHEME"},
		{"gopher", map[string]any{"url": "gopher://127.0.0.1:6379/_FLUSHALL"}, "URL_SCHEME"},
		{"ftp", map[string]any{"url": "FTP://x.example/a"}, "URL_SCHEME"},
		{"no host", map[string]any{"url": "https:///path"}, "URL_SCHEME"},
		{"relative", map[string]any{"url": "/relative"}, "URL_SCHEME"},
		{"CRLF in header value", map[string]any{"url": "https://x.example", "headers": map[string]any{"X-A": "v\r\nX-Injected: 1"}}, "HEADER"},
		{"LF in header name", map[string]any{"url": "https://x.example", "headers": map[string]any{"X-A\nB": "v"}}, "HEADER"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tr := &countingTransport{}
			h := &steps.HTTP{Client: &http.Client{Transport: tr}}
			_, err := h.Run(context.Background(), steps.Input{Config: c.config, IdempotencyKey: "k"})
			res := classify.Classify(err)
			if res.Type != classify.Permanent || res.Code != c.code {
				t.Fatalf("Run: %v classified %s/%s, want permanent/%s", err, res.Type, res.Code, c.code)
			}
			if n := tr.calls.Load(); n != 0 {
				t.Fatalf("%d requests sent", n)
			}
		})
	}
}

func TestHTTPValidate(t *testing.T) {
	t.Parallel()
	h := &steps.HTTP{}
	cases := []struct {
		name   string
		config map[string]any
		want   map[string]string // key → substring; nil = valid
	}{
		{"https", map[string]any{"url": "https://x.example/a"}, nil},
		{"upper-case scheme", map[string]any{"url": "HTTP://x.example/a"}, nil},
		{"templated host", map[string]any{"url": "https://{{ input.host }}/a"}, nil},
		{"one placeholder", map[string]any{"url": "{{ steps.a.output.next }}"}, nil},
		{"file", map[string]any{"url": "file:///etc/passwd"}, map[string]string{"url": "http or https"}},
		{"gopher", map[string]any{"url": "gopher://x.example/"}, map[string]string{"url": "http or https"}},
		{"javascript", map[string]any{"url": "javascript:alert(1)"}, map[string]string{"url": "http or https"}},
		{"placeholder then scheme", map[string]any{"url": "{{ '' }}gopher://x.example/"}, map[string]string{"url": "http:// or https://"}},
		{"two placeholders", map[string]any{"url": "{{ input.scheme }}{{ input.rest }}"}, map[string]string{"url": "http:// or https://"}},
		{"CR in value", map[string]any{"url": "https://x.example", "headers": map[string]any{"X-A": "a\rb"}}, map[string]string{"headers.X-A": "control"}},
		{"NUL in value", map[string]any{"url": "https://x.example", "headers": map[string]any{"X-A": "a\x00b"}}, map[string]string{"headers.X-A": "control"}},
		{"CRLF in name", map[string]any{"url": "https://x.example", "headers": map[string]any{"X-A\r\nB": "v"}}, map[string]string{"headers.X-A\r\nB": "header name"}},
		{"empty name", map[string]any{"url": "https://x.example", "headers": map[string]any{"": "v"}}, map[string]string{"headers.": "header name"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			errs := h.Validate(c.config)
			if c.want == nil {
				if errs != nil {
					t.Fatalf("Validate = %v, want valid", errs)
				}
				return
			}
			for k, sub := range c.want {
				if !strings.Contains(errs[k], sub) {
					t.Errorf("errs[%q] = %q (all %v), want containing %q", k, errs[k], errs, sub)
				}
			}
		})
	}
}
