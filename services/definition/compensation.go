package definition

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"lifeline/services/retry"
	"lifeline/services/tmpl"
)

// Compensation types (seed 000's compensationActionSchema).
const (
	CompAPICall  = "api_call"
	CompDatabase = "database_operation"
	CompNotify   = "notification"
	CompManual   = "manual"
	CompNone     = "none"
)

// CompensationTypes lists them.
var CompensationTypes = []string{CompAPICall, CompDatabase, CompNotify, CompManual, CompNone}

// CompensationRoots are the names a compensation's templates may use: the execution's input,
// the output of the step it undoes (step.output), every completed step's output, the execution
// and the organization's credentials.
var CompensationRoots = []string{"credentials", "execution", "input", "step", "steps"}

// Compensation undoes a completed step during a rollback. The config keys are seed 000's
// compensationActionSchema's (endpoint, method, body, sqlTemplate, notificationTemplate,
// instructions); url, statement and message are accepted for the first three.
//
//	api_call           config: endpoint, method (POST), headers, body, timeoutMs: a request
//	                   through the SSRF guard, with Idempotency-Key compensate:{execution}:{step}
//	database_operation config: connection (a name an admin configured), sqlTemplate (one SQL
//	                   statement with $1, $2… placeholders, never rendered as a template),
//	                   params (templates, bound as parameters), timeoutMs
//	notification       config: notificationTemplate (template)
//	manual             config: instructions; the rollback waits until an admin confirms or skips it
//	none               nothing to undo
type Compensation struct {
	CompensationType string         `json:"compensationType"`
	Config           map[string]any `json:"config,omitempty"`
	// RetryPolicy is the compensation's own (default: 3 retries, exponential from 5 s).
	RetryPolicy *retry.Spec `json:"retryPolicy,omitempty"`
}

var compMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE"}

// A config field's names: seed 000's first, then the one Lifeline also accepts.
var (
	EndpointKeys = []string{"endpoint", "url"}
	SQLKeys      = []string{"sqlTemplate", "statement"}
	MessageKeys  = []string{"notificationTemplate", "message"}
)

// ConfigString is cfg's trimmed string under the first of keys it has, and that key (keys[0]
// when it has none).
func ConfigString(cfg map[string]any, keys []string) (value, key string) {
	for _, k := range keys {
		if v, ok := cfg[k]; ok {
			s, _ := v.(string)
			return strings.TrimSpace(s), k
		}
	}
	return "", keys[0]
}

// validateCompensation returns field messages for a step's compensation, keyed under prefix.
func validateCompensation(c *Compensation, prefix string, errs map[string]string) {
	if !slices.Contains(CompensationTypes, c.CompensationType) {
		errs[prefix+".compensationType"] = "must be one of " + strings.Join(CompensationTypes, ", ")
		return
	}
	cfg := c.Config
	if cfg == nil {
		cfg = map[string]any{}
	}
	str := func(k string) (string, bool) {
		v, ok := cfg[k].(string)
		return strings.TrimSpace(v), ok
	}
	p := prefix + ".config."
	switch c.CompensationType {
	case CompAPICall:
		u, k := ConfigString(cfg, EndpointKeys)
		switch {
		case u == "":
			errs[p+k] = "is required"
		case !strings.Contains(u, "{{"):
			if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
				errs[p+k] = "must be an http or https URL"
			}
		case !strings.HasPrefix(strings.ToLower(u), "http://") && !strings.HasPrefix(strings.ToLower(u), "https://"):
			errs[p+k] = "must start with http:// or https://"
		}
		if m, ok := str("method"); ok && !slices.Contains(compMethods, strings.ToUpper(m)) {
			errs[p+"method"] = "must be one of " + strings.Join(compMethods, ", ")
		}
	case CompDatabase:
		if name, _ := str("connection"); name == "" {
			errs[p+"connection"] = "is required: the name of a database connection"
		}
		switch st, k := ConfigString(cfg, SQLKeys); {
		case st == "":
			errs[p+k] = "is required"
		case strings.Contains(st, "{{"):
			errs[p+k] = "must not contain templates; put values in params and refer to them as $1, $2…"
		case len(st) > 10_000:
			errs[p+k] = "must be at most 10000 characters"
		}
		if v, ok := cfg["params"]; ok {
			if _, isList := v.([]any); !isList {
				errs[p+"params"] = "must be a list"
			}
		}
	case CompNotify:
		if m, k := ConfigString(cfg, MessageKeys); m == "" {
			errs[p+k] = "is required"
		}
	case CompManual:
		if m, _ := str("instructions"); m == "" {
			errs[p+"instructions"] = "is required: what the person has to do"
		}
	}
	if ms, ok := cfg["timeoutMs"].(float64); ok && (ms < MinStepTimeoutMs || ms > MaxStepTimeoutMs) {
		errs[p+"timeoutMs"] = fmt.Sprintf("must be between %d and %d", MinStepTimeoutMs, MaxStepTimeoutMs)
	}
	_, terrs := tmpl.Check(Compensation{Config: cfg}.Templated(), CompensationRoots...)
	for k, v := range terrs {
		errs[joinPath(prefix+".config", k)] = v
	}
	if c.RetryPolicy != nil {
		for k, v := range c.RetryPolicy.Validate() {
			errs[prefix+".retryPolicy."+k] = v
		}
	}
}

// Templated is the part of the config its templates are rendered over: all of it but a
// database_operation's statement, which is SQL, never a template.
func (c Compensation) Templated() map[string]any {
	out := make(map[string]any, len(c.Config))
	for k, v := range c.Config {
		if !slices.Contains(SQLKeys, k) {
			out[k] = v
		}
	}
	return out
}
