package sandbox

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

type kind int

const (
	kindOK kind = iota
	kindFail503
	kindDown
	kindRateLimited
	kindSlow
	kindInvalid
	kindNotFound
	kindUnauthorized
	kindServerError
	kindOutage
)

// scenario is a parsed scenario name. For fail503, rate_limited and slow only
// the first n calls of a logical operation are affected.
type scenario struct {
	name       string
	kind       kind
	n          int
	retryAfter int // seconds, rate_limited
	delay      time.Duration
	period     time.Duration // outage: the cycle
	down       time.Duration // outage: how long it is down at the start of each cycle
}

// knownScenarios lists the scenario forms for a caller who asked for an
// unknown one. The slice is new on every call.
func knownScenarios() []string {
	return []string{
		"ok", "flaky", "fail503:N", "down", "rate_limited", "429:N:S", "slow", "slow:N:MS",
		"invalid", "notfound", "unauthorized", "server_error", "outage", "outage:P:D",
	}
}

const (
	maxCalls      = 1_000_000
	maxRetryAfter = 86_400  // seconds
	maxSlowMs     = 600_000 // ten minutes
)

// parseScenario understands (case-insensitive, surrounding spaces ignored):
//
//	""/ok          success
//	flaky          503 for the first 2 calls, then success (= fail503:2)
//	fail503:N      503 for the first N calls, then success
//	down           always 503
//	rate_limited   429 with Retry-After: 2 for the first call (= 429:1:2)
//	429:N:S        429 with Retry-After: S for the first N calls
//	slow           the first call waits 30s before answering (= slow:1:30000)
//	slow:N:MS      the first N calls wait MS milliseconds
//	invalid        always 400 {"error":"validation","fields":{…}}
//	notfound       always 404
//	unauthorized   always 401
//	server_error   always 500
//	outage         503 during the first minute of every 3 minutes (= outage:180:60)
//	outage:P:D     503 during the first D seconds of every P seconds, by the sandbox's clock
//	               (a dependency that goes down and comes back: circuit breakers open and close)
func parseScenario(s string) (scenario, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	sc := scenario{name: name}
	switch name {
	case "", "ok":
		sc.name, sc.kind = "ok", kindOK
		return sc, nil
	case "flaky":
		sc.kind, sc.n = kindFail503, 2
		return sc, nil
	case "down":
		sc.kind = kindDown
		return sc, nil
	case "rate_limited":
		sc.kind, sc.n, sc.retryAfter = kindRateLimited, 1, 2
		return sc, nil
	case "slow":
		sc.kind, sc.n, sc.delay = kindSlow, 1, 30*time.Second
		return sc, nil
	case "invalid":
		sc.kind = kindInvalid
		return sc, nil
	case "notfound":
		sc.kind = kindNotFound
		return sc, nil
	case "unauthorized":
		sc.kind = kindUnauthorized
		return sc, nil
	case "server_error":
		sc.kind = kindServerError
		return sc, nil
	case "outage":
		sc.kind, sc.period, sc.down = kindOutage, 180*time.Second, 60*time.Second
		return sc, nil
	}

	parts := strings.Split(name, ":")
	var err error
	switch {
	case parts[0] == "fail503" && len(parts) == 2:
		sc.kind = kindFail503
		sc.n, err = bounded(parts[1], "N", maxCalls)
	case parts[0] == "429" && len(parts) == 3:
		sc.kind = kindRateLimited
		if sc.n, err = bounded(parts[1], "N", maxCalls); err == nil {
			sc.retryAfter, err = bounded(parts[2], "S", maxRetryAfter)
		}
	case parts[0] == "slow" && len(parts) == 3:
		sc.kind = kindSlow
		var ms int
		if sc.n, err = bounded(parts[1], "N", maxCalls); err == nil {
			ms, err = bounded(parts[2], "MS", maxSlowMs)
			sc.delay = time.Duration(ms) * time.Millisecond
		}
	case parts[0] == "outage" && len(parts) == 3:
		sc.kind = kindOutage
		var p, d int
		if p, err = bounded(parts[1], "P", maxRetryAfter); err == nil {
			d, err = bounded(parts[2], "D", p)
		}
		if err == nil && p == 0 {
			err = fmt.Errorf("the period P must be at least 1")
		}
		sc.period, sc.down = time.Duration(p)*time.Second, time.Duration(d)*time.Second
	default:
		return scenario{}, fmt.Errorf("unknown scenario %q", s)
	}
	if err != nil {
		return scenario{}, fmt.Errorf("scenario %q: %w", s, err)
	}
	return sc, nil
}

func bounded(s, what string, max int) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > max {
		return 0, fmt.Errorf("%s must be an integer from 0 to %d", what, max)
	}
	return n, nil
}
