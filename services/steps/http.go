package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"lifeline/services/classify"
	"lifeline/services/outbound"
	"lifeline/services/retry"
)

// HTTP calls an external service: config {"method", "url", "headers", "body", "timeoutMs"}.
// The body is sent as JSON; a JSON response body becomes the output (other bodies become a
// string). Every request carries the header Idempotency-Key with the attempt's key. A
// non-2xx response is returned as a *classify.HTTPError carrying Retry-After.
type HTTP struct {
	Client *http.Client
	// Now is used to parse HTTP-date Retry-After values.
	Now func() time.Time
}

var _ Type = (*HTTP)(nil)

// MaxResponseBytes bounds what an http step reads of a response.
const MaxResponseBytes = 1 << 20

type httpConfig struct {
	Method    string            `json:"method"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers"`
	Body      any               `json:"body"`
	TimeoutMs int               `json:"timeoutMs"`
}

var methods = map[string]bool{"GET": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "HEAD": true}

// Validate checks the config as written.
func (h *HTTP) Validate(config map[string]any) map[string]string {
	errs := unknownKeys(config, "method", "url", "headers", "body", "timeoutMs")
	add := func(k, v string) {
		if errs == nil {
			errs = map[string]string{}
		}
		errs[k] = v
	}
	if m, ok := config["method"]; ok {
		s, isStr := m.(string)
		if !isStr || !methods[strings.ToUpper(s)] {
			add("method", "must be one of GET, POST, PUT, PATCH, DELETE, HEAD")
		}
	}
	u, ok := config["url"].(string)
	switch {
	case !ok || strings.TrimSpace(u) == "":
		add("url", "is required")
	case !strings.Contains(u, "{{"):
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			add("url", "must be an absolute http or https URL")
		}
	case !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "{{"):
		add("url", "must start with http:// or https://")
	}
	if hv, ok := config["headers"]; ok {
		hm, isMap := hv.(map[string]any)
		if !isMap {
			add("headers", "must be an object of header names to strings")
		}
		for k, v := range hm {
			if _, isStr := v.(string); !isStr {
				add("headers."+k, "must be a string, not "+typeName(v))
			}
		}
	}
	if tv, ok := config["timeoutMs"]; ok {
		f, isNum := tv.(float64)
		if !isNum || f < 100 || f > 600000 || f != float64(int64(f)) {
			add("timeoutMs", "must be a whole number between 100 and 600000")
		}
	}
	return errs
}

// Run sends the request.
func (h *HTTP) Run(ctx context.Context, in Input) (any, error) {
	var c httpConfig
	if err := decode(in.Config, &c); err != nil {
		return nil, classify.New(classify.Validation, "CONFIG", "http step config: "+err.Error())
	}
	method := strings.ToUpper(c.Method)
	if method == "" {
		method = http.MethodPost
		if c.Body == nil {
			method = http.MethodGet
		}
	}
	if c.TimeoutMs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(c.TimeoutMs)*time.Millisecond)
		defer cancel()
	}
	var body io.Reader
	if c.Body != nil && method != http.MethodGet && method != http.MethodHead {
		b, err := json.Marshal(c.Body)
		if err != nil {
			return nil, classify.New(classify.Validation, "BODY", "http step body: "+err.Error())
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.URL, body)
	if err != nil {
		return nil, classify.New(classify.Validation, "URL", fmt.Sprintf("http step url %q: %v", c.URL, err))
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "Lifeline/1.0")
	for k, v := range c.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Idempotency-Key", in.IdempotencyKey)

	resp, err := h.Client.Do(req)
	if errors.Is(err, outbound.ErrDenied) {
		// Retrying cannot help: the address is refused by configuration.
		return nil, classify.New(classify.Permanent, "DESTINATION_DENIED",
			fmt.Sprintf("%s %s: the destination address is not allowed (private, loopback, link-local or metadata; see LIFELINE_OUTBOUND_ALLOW)", method, c.URL))
	}
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
	if err != nil {
		return nil, fmt.Errorf("read response of %s %s: %w", method, c.URL, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		he := &classify.HTTPError{Method: method, URL: c.URL, StatusCode: resp.StatusCode, Body: truncate(string(raw), 2048)}
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			now := time.Now
			if h.Now != nil {
				now = h.Now
			}
			if d, ok := retry.ParseRetryAfter(ra, now()); ok {
				he.RetryAfter = d
			}
		}
		return nil, he
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{"status": resp.StatusCode}, nil
	}
	var out any
	if json.Unmarshal(raw, &out) == nil {
		return out, nil
	}
	return string(raw), nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
