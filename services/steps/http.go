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
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"

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
		if problem := checkURL(u); problem != "" {
			add("url", problem)
		}
	case isSinglePlaceholder(u):
		// The whole URL comes from the input or an earlier step: its scheme is checked
		// when the step runs (a scheme other than http or https fails for good).
	case !hasHTTPPrefix(u):
		add("url", "must start with http:// or https:// (or be a single {{ … }} placeholder)")
	}
	if hv, ok := config["headers"]; ok {
		hm, isMap := hv.(map[string]any)
		if !isMap {
			add("headers", "must be an object of header names to strings")
		}
		for k, v := range hm {
			str, isStr := v.(string)
			switch {
			case !httpguts.ValidHeaderFieldName(k):
				add("headers."+k, "is not a valid header name (letters, digits and !#$%&'*+-.^_`|~ only; no spaces, CR or LF)")
			case !isStr:
				add("headers."+k, "must be a string, not "+typeName(v))
			case !httpguts.ValidHeaderFieldValue(str):
				add("headers."+k, "must not contain control characters (CR, LF, NUL…)")
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
	if _, perr := url.Parse(c.URL); perr == nil && checkURL(c.URL) != "" {
		// Another scheme (file://, gopher://…) or no host: no retry can change that.
		return nil, classify.New(classify.Permanent, "URL_SCHEME", fmt.Sprintf("http step url %q %s", c.URL, checkURL(c.URL)))
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
		if !httpguts.ValidHeaderFieldName(k) || !httpguts.ValidHeaderFieldValue(v) {
			// A rendered template put CR, LF or another control character in a header.
			return nil, classify.New(classify.Permanent, "HEADER", fmt.Sprintf("http step header %q: invalid name or value (control characters such as CR or LF)", k))
		}
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
		// Named by the URL's host, never the address it resolved to (stored and shown).
		return nil, outbound.Describe(req.URL.Host, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
	if err != nil {
		return nil, fmt.Errorf("read response of %s %s: %w", method, c.URL, outbound.Describe(req.URL.Host, err))
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
	// A JSON response is the output, numbers digit for digit (the engine stores one that no
	// float64 can hold, like 1e1000000, as a string); anything else is the text.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out any
	if dec.Decode(&out) == nil && !dec.More() {
		return out, nil
	}
	return string(raw), nil
}

// checkURL returns why u cannot be called ("" when it can): it must be an absolute http or
// https URL with a host.
func checkURL(u string) string {
	pu, err := url.Parse(u)
	switch {
	case err != nil:
		return "must be an absolute http or https URL"
	case pu.Scheme != "http" && pu.Scheme != "https":
		return "must be an absolute http or https URL (not " + strconv.Quote(pu.Scheme+":") + ")"
	case pu.Host == "":
		return "must be an absolute http or https URL with a host"
	}
	return ""
}

// hasHTTPPrefix reports whether u starts with http:// or https:// (any case) before its
// first placeholder.
func hasHTTPPrefix(u string) bool {
	lit, _, _ := strings.Cut(u, "{{")
	lit = strings.ToLower(lit)
	return strings.HasPrefix(lit, "http://") || strings.HasPrefix(lit, "https://")
}

// isSinglePlaceholder reports whether u is one {{ … }} placeholder and nothing else.
func isSinglePlaceholder(u string) bool {
	u = strings.TrimSpace(u)
	return strings.HasPrefix(u, "{{") && strings.HasSuffix(u, "}}") && strings.Count(u, "{{") == 1
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
