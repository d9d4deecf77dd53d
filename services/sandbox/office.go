package sandbox

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"lifeline/services/checkdigit"
)

// The office's weather: with Options.Office, the services fail the way an office's real ones
// do, because of the data they get and the time of day, never because the request asked to.
// Each failure says its true cause in the body's "message" (in Polish, as the services an
// office uses answer), and each is cured by what cures the real one:
//
//   - a NIP that is not a NIP (a digit missing or one typed wrong: the checksum) is refused
//     by every service that takes one (400), and so is a client's e-mail address without an
//     "@" by the mail server; editing the input cures it;
//   - the bank's API is down for the last minute of every three (503 with Retry-After);
//     a retry after it is back cures it;
//   - the tax office's e-Deklaracje gateway has a maintenance break during the first four
//     minutes of every half hour, counted from the sandbox's start (503 with Retry-After);
//     a retry after the break cures it;
//   - one bank statement in five holds a purchase invoice the client has not yet sent to
//     KSeF: matching it is refused (404) until the invoice arrives, four minutes after the
//     statement was first matched; a retry after that cures it;
//   - one client in four has used up the bank's quota of payroll transfer files: the export
//     is refused (429 with Retry-After) until three minutes after its first attempt; a retry
//     after that cures it;
//   - the ledger and the mail server each refuse one request in ten once, as busy (503); the
//     retry policy cures that by itself;
//   - KSeF takes a bearer token (Authorization), and the office's token, ExpiredKSeFToken,
//     expired twenty minutes before the sandbox started: every query with it is refused
//     (401, saying when it expired and that an admin must upload a new one). Any other
//     token of at least eight characters is accepted, such as NewKSeFToken, which the
//     demo's inbox shows the admin; replacing the organization's credential once cures every
//     dead letter it left, by a plain retry.
const (
	bankOutageCycle    = 3 * time.Minute
	bankOutageFrom     = 2 * time.Minute // down from here to the end of each cycle
	gatewayCycle       = 30 * time.Minute
	gatewayBreak       = 4 * time.Minute // down from the cycle's start
	invoiceLate        = 4 * time.Minute
	quotaWait          = 3 * time.Minute
	shareLateInvoice   = 20               // percent of statements
	shareQuota         = 25               // percent of clients
	shareBusyOnce      = 10               // percent of postings and mails
	tokenExpiredBefore = 20 * time.Minute // before the sandbox's start
	officeTimeZone     = "Europe/Warsaw"
	officeClockLayout  = "15:04:05"
)

// The KSeF tokens of the office: the one it has (expired), and the one the KSeF portal
// issued to replace it (any other token of at least eight characters is accepted too).
const (
	ExpiredKSeFToken = "ksef-2026-05-BRD-9f3e71c2a4"
	NewKSeFToken     = "ksef-2026-11-BRD-5b0d28e6f1"
)

// weather decides the failure, if any, of a request that passed routing and decoding, and
// writes it. n is the call's number within its logical operation (1 for the first).
func (h *Handler) weather(w http.ResponseWriter, hdr http.Header, path string, req map[string]any, n int) bool {
	now := h.now()
	if path == "/ksef/invoices/query" {
		token := strings.TrimSpace(strings.TrimPrefix(hdr.Get("Authorization"), "Bearer "))
		switch {
		case token == ExpiredKSeFToken:
			at := h.started.Add(-tokenExpiredBefore).In(h.zone)
			return h.refuse(w, http.StatusUnauthorized, time.Time{}, "token_expired",
				"Token KSeF wygasł %s o %s — administrator musi wgrać nowy", at.Format("02.01"), at.Format("15:04"))
		case len(token) < 8:
			return h.refuse(w, http.StatusUnauthorized, time.Time{}, "token_missing",
				"Brak ważnego tokenu KSeF w nagłówku Authorization — administrator musi go wgrać")
		}
	}
	if msg := nipProblem(req["clientNip"]); msg != "" {
		writeError(w, http.StatusBadRequest, "validation", map[string]any{"message": msg, "fields": map[string]string{"clientNip": msg}})
		return true
	}
	switch path {
	case "/bank/statements/import":
		if since := now.Sub(h.started) % bankOutageCycle; since >= bankOutageFrom {
			back := now.Add(bankOutageCycle - since)
			return h.refuse(w, http.StatusServiceUnavailable, back, "bank_unavailable",
				"API banku chwilowo niedostępne (prace serwisowe); wyciągi będą dostępne od %s", h.clock(back))
		}
	case "/vat/jpk-v7/submit":
		if since := now.Sub(h.started) % gatewayCycle; since < gatewayBreak {
			back := now.Add(gatewayBreak - since)
			return h.refuse(w, http.StatusServiceUnavailable, back, "gateway_maintenance",
				"Bramka e-Deklaracje: przerwa techniczna do %s; dokument nie został przyjęty", h.clock(back))
		}
	case "/invoices/match":
		statement, _ := req["statementId"].(string)
		if statement == "" || share(statementKey(statement)) >= shareLateInvoice {
			break
		}
		if first := h.firstSeen("invoice "+statementKey(statement), now); now.Sub(first) < invoiceLate {
			g := newGen(path, []byte(statementKey(statement)))
			return h.refuse(w, http.StatusNotFound, time.Time{}, "invoice_not_in_ksef",
				"Faktura zakupu FV/%s/%04d na %s zł z wyciągu %s nie jest jeszcze w KSeF: klient jej nie przesłał",
				periodOf(statement), g.intn(1, 2400), plAmount(g.cents(20_000, 2_500_000)), statement)
		}
	case "/payroll/export":
		client := nipDigits(req["clientNip"])
		if client == "" || share("quota "+client) >= shareQuota {
			break
		}
		period, _ := req["period"].(string)
		if first := h.firstSeen("quota "+client+" "+period, now); now.Sub(first) < quotaWait {
			next := first.Add(quotaWait)
			return h.refuse(w, http.StatusTooManyRequests, next, "quota_exceeded",
				"Bank: dzienny limit plików przelewów dla rachunku firmy (NIP %s) wyczerpany; następny plik można wysłać o %s", client, h.clock(next))
		}
	case "/mail/send":
		if to, present := req["to"]; present {
			if s, _ := to.(string); !strings.Contains(s, "@") || strings.HasPrefix(s, "@") || strings.HasSuffix(s, "@") {
				msg := fmt.Sprintf("Adres „%v” nie jest adresem e-mail", to)
				writeError(w, http.StatusBadRequest, "validation", map[string]any{"message": msg, "fields": map[string]string{"to": msg}})
				return true
			}
		}
		fallthrough
	case "/ledger/postings":
		if n == 1 && share(fmt.Sprint(path, req)) < shareBusyOnce {
			return h.refuse(w, http.StatusServiceUnavailable, time.Time{}, "busy", "Usługa chwilowo przeciążona, spróbuj ponownie za chwilę")
		}
	}
	return false
}

// nipProblem says what is wrong with a NIP ("" when it is one, or when there is none): its
// characters, its length, or its check digit (weights 6 5 7 2 3 4 5 6 7, modulo 11).
func nipProblem(v any) string {
	if v == nil {
		return ""
	}
	raw := strings.TrimSpace(fmt.Sprint(v))
	d := nipDigits(v)
	switch {
	case d == "":
		return fmt.Sprintf("NIP „%s” może zawierać tylko cyfry (i myślniki)", raw)
	case len(d) != 10:
		return fmt.Sprintf("NIP „%s” ma %d %s, a powinien mieć 10", raw, len(d), digitsWord(len(d)))
	}
	if !checkdigit.NIP(d) {
		return fmt.Sprintf("NIP „%s”: cyfra kontrolna się nie zgadza (literówka w numerze?)", raw)
	}
	return ""
}

// nipDigits returns a NIP's digits, without the dashes and spaces it is often written with
// ("" when anything else is in it).
func nipDigits(v any) string {
	var s string
	switch v := v.(type) {
	case string:
		s = strings.NewReplacer("-", "", " ", "").Replace(v)
	case float64:
		s = strconv.FormatFloat(v, 'f', -1, 64)
	}
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return ""
	}
	return s
}

// digitsWord is "cyfra" in the Polish form that goes with n.
func digitsWord(n int) string {
	switch {
	case n == 1:
		return "cyfrę"
	case n%10 >= 2 && n%10 <= 4 && (n%100 < 12 || n%100 > 14):
		return "cyfry"
	}
	return "cyfr"
}

// refuse writes a failure with its message; a non-zero until becomes Retry-After.
func (h *Handler) refuse(w http.ResponseWriter, status int, until time.Time, code, format string, args ...any) bool {
	if !until.IsZero() {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(until.Sub(h.now()).Seconds()+0.999))))
	}
	writeError(w, status, code, map[string]any{"message": fmt.Sprintf(format, args...)})
	return true
}

// firstSeen returns when key was first seen (now, the first time).
func (h *Handler) firstSeen(key string, now time.Time) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t, ok := h.seen.get(key, now); ok {
		return t
	}
	h.seen.put(key, now, now)
	return now
}

// clock shows t as the office's wall clock.
func (h *Handler) clock(t time.Time) string { return t.In(h.zone).Format(officeClockLayout) }

// share maps s to a stable number in [0, 100).
func share(s string) int {
	sum := sha256.Sum256([]byte(s))
	return int(binary.BigEndian.Uint64(sum[:8]) % 100)
}

// periodOf reads "2026/10" from a statement id like "WB-202610-1A2B3C".
func periodOf(statement string) string {
	parts := strings.Split(statement, "-")
	if len(parts) < 2 || len(parts[1]) != 6 {
		return "2026/01"
	}
	return parts[1][:4] + "/" + parts[1][4:]
}

// plAmount writes 12345.6 as "12 345,60".
func plAmount(f float64) string {
	s := strconv.FormatFloat(f, 'f', 2, 64)
	whole, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteRune('\u00a0')
		}
		b.WriteRune(c)
	}
	return b.String() + "," + frac
}

func loadZone(name string) *time.Location {
	if z, err := time.LoadLocation(name); err == nil {
		return z
	}
	return time.UTC
}
