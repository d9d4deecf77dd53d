package sandbox

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
)

// endpoint answers a request that passed routing, JSON decoding and the
// scenario. req is the decoded body ({} for GET); g is seeded from path and
// body, so the answer is a pure function of the request.
type endpoint struct {
	method string
	serve  func(req map[string]any, g *gen) (status int, body any)
}

func lookup(path string) (endpoint, bool) {
	switch path {
	case "/health":
		return endpoint{http.MethodGet, health}, true
	case "/bank/statements/import":
		return endpoint{http.MethodPost, importStatement}, true
	case "/bank/statements/from-file":
		return endpoint{http.MethodPost, importStatementFile}, true
	case "/invoices/match":
		return endpoint{http.MethodPost, matchInvoices}, true
	case "/ledger/postings":
		return endpoint{http.MethodPost, postLedger}, true
	case "/vat/jpk-v7/validate":
		return endpoint{http.MethodPost, validateJPK}, true
	case "/vat/jpk-v7/submit":
		return endpoint{http.MethodPost, submitJPK}, true
	case "/payroll/export":
		return endpoint{http.MethodPost, exportPayroll}, true
	case "/ksef/invoices/query":
		return endpoint{http.MethodPost, queryKSeF}, true
	case "/mail/send":
		return endpoint{http.MethodPost, sendMail}, true
	case "/tasks":
		return endpoint{http.MethodPost, createTask}, true
	}
	if rest, ok := strings.CutPrefix(path, "/undo/"); ok && rest != "" {
		return endpoint{http.MethodPost, undo}, true
	}
	return endpoint{}, false
}

func health(map[string]any, *gen) (int, any) {
	return http.StatusOK, map[string]any{"ok": true}
}

func undo(map[string]any, *gen) (int, any) {
	return http.StatusOK, map[string]any{"undone": true}
}

func importStatement(req map[string]any, g *gen) (int, any) {
	if bad := checkNIP(req); bad != nil {
		return validationError(bad)
	}
	n := g.intn(18, 240)
	credits := g.cents(int64(n)*20_000, int64(n)*180_000) // 200–1800 PLN per transaction
	debits := round2(credits * (0.55 + 0.43*g.float()))
	return http.StatusOK, map[string]any{
		"statementId":  fmt.Sprintf("WB-%s-%s", periodTag(req), strings.ToUpper(g.hex(3))),
		"transactions": n,
		"totalCredits": credits,
		"totalDebits":  debits,
		"currency":     "PLN",
	}
}

// importStatementFile imports the statement from the file the bank e-mailed (the bank
// import's fallback while the bank's API is down): the statement the API gives for the same
// request (its id with "-PLIK", read from the file), so that what follows it (a late invoice
// or none, statementKey) is the same by either way. The office's bank outage does not
// reach it.
func importStatementFile(req map[string]any, _ *gen) (int, any) {
	canonical, _ := json.Marshal(req) // as the API's request is read (sandbox.go)
	status, body := importStatement(req, newGen("/bank/statements/import", canonical))
	if m, ok := body.(map[string]any); ok && status == http.StatusOK {
		m["statementId"] = m["statementId"].(string) + fileSuffix
		m["source"] = "email"
	}
	return status, body
}

// fileSuffix marks a statement read from the file the bank e-mailed.
const fileSuffix = "-PLIK"

// statementKey is the statement a statement id names, however it was imported.
func statementKey(id string) string { return strings.TrimSuffix(id, fileSuffix) }

func matchInvoices(req map[string]any, g *gen) (int, any) {
	t, ok := count(req["transactions"])
	if !ok {
		t = g.intn(18, 240)
	}
	matched := int(math.Round(float64(t) * (0.78 + 0.21*g.float())))
	rate := 0.0
	if t > 0 {
		rate = math.Round(float64(matched)/float64(t)*10_000) / 10_000
	}
	return http.StatusOK, map[string]any{"matched": matched, "unmatched": t - matched, "matchRate": rate}
}

func postLedger(req map[string]any, g *gen) (int, any) {
	matched, ok := count(req["matched"])
	if !ok {
		matched = g.intn(15, 200)
	}
	// Each matched transaction is booked on both sides (Wn/Ma).
	return http.StatusOK, map[string]any{"postingId": "PK-" + strings.ToUpper(g.hex(4)), "entries": 2 * matched}
}

func validateJPK(req map[string]any, g *gen) (int, any) {
	if bad := checkNIP(req); bad != nil {
		return validationError(bad)
	}
	sales, ok := number(req["salesTotal"])
	if !ok {
		sales = g.cents(5_000_000, 80_000_000)
	}
	purchases, ok := number(req["purchaseTotal"])
	if !ok {
		purchases = round2(sales * (0.3 + 0.6*g.float()))
	}
	// Negative means surplus input VAT (to be refunded or carried forward).
	return http.StatusOK, map[string]any{"valid": true, "vatDue": round2(0.23 * (sales - purchases))}
}

func submitJPK(req map[string]any, g *gen) (int, any) {
	if bad := checkNIP(req); bad != nil {
		return validationError(bad)
	}
	return http.StatusOK, map[string]any{
		"referenceNumber": g.hex(16), // e-Deklaracje style: 32 hex digits
		"status":          "accepted",
		"upo":             fmt.Sprintf("UPO-%s-%s", periodTag(req), strings.ToUpper(g.hex(5))),
	}
}

func exportPayroll(req map[string]any, g *gen) (int, any) {
	if bad := checkNIP(req); bad != nil {
		return validationError(bad)
	}
	rows, ok := count(req["employees"])
	if !ok {
		rows = g.intn(3, 45)
	}
	return http.StatusOK, map[string]any{"fileId": fmt.Sprintf("LP-%s-%s", periodTag(req), strings.ToUpper(g.hex(3))), "rows": rows}
}

// createTask opens a task for a person in the office (what an on-failure handler does: "fix
// the client's NIP and file again").
func createTask(req map[string]any, g *gen) (int, any) {
	if t, _ := req["title"].(string); strings.TrimSpace(t) == "" {
		return validationError(map[string]string{"title": "is required"})
	}
	return http.StatusCreated, map[string]any{"taskId": "ZAD-" + strings.ToUpper(g.hex(3)), "status": "open", "assignee": req["assignee"]}
}

func sendMail(req map[string]any, g *gen) (int, any) {
	if to, present := req["to"]; present {
		if s, ok := to.(string); !ok || !strings.Contains(s, "@") {
			return validationError(map[string]string{"to": "must be an e-mail address"})
		}
	}
	return http.StatusOK, map[string]any{"messageId": "<" + g.hex(12) + "@sandbox.biuro-demo.pl>"}
}

func validationError(fields map[string]string) (int, any) {
	return http.StatusBadRequest, map[string]any{"error": "validation", "fields": fields}
}

// checkNIP returns field errors when clientNip is present and is not 10 digits (dashes and
// spaces allowed, as NIPs are often written 526-104-08-28).
func checkNIP(req map[string]any) map[string]string {
	v, present := req["clientNip"]
	if !present || len(nipDigits(v)) == 10 {
		return nil
	}
	return map[string]string{"clientNip": "NIP must have 10 digits"}
}

// periodTag turns "2026-10" into "202610" for use in identifiers; anything
// that is not a plausible period becomes "000000".
func periodTag(req map[string]any) string {
	s, _ := req["period"].(string)
	s = strings.ReplaceAll(strings.TrimSpace(s), "-", "")
	if len(s) != 6 || strings.Trim(s, "0123456789") != "" {
		return "000000"
	}
	return s
}

// number accepts a JSON number or a numeric string ("1234.56" or "1 234,56").
func number(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case string:
		s := strings.NewReplacer(" ", "", "\u00a0", "", ",", ".").Replace(v)
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, false
		}
		return f, true
	}
	return 0, false
}

// count accepts a non-negative number, a numeric string or an array (its length).
func count(v any) (int, bool) {
	if a, ok := v.([]any); ok {
		return len(a), true
	}
	f, ok := number(v)
	if !ok || f < 0 || f > 1e9 {
		return 0, false
	}
	return int(math.Round(f)), true
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }

// gen is a deterministic source seeded from a request.
type gen struct {
	r *rand.Rand
}

func newGen(path string, canonicalBody []byte) *gen {
	h := sha256.New()
	h.Write([]byte(path))
	h.Write([]byte{0})
	h.Write(canonicalBody)
	sum := h.Sum(nil)
	return &gen{r: rand.New(rand.NewPCG(binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:16])))}
}

// intn returns an int in [lo, hi].
func (g *gen) intn(lo, hi int) int { return lo + g.r.IntN(hi-lo+1) }

func (g *gen) float() float64 { return g.r.Float64() }

// cents returns an amount in PLN with grosz precision, between lo and hi grosze.
func (g *gen) cents(lo, hi int64) float64 {
	return float64(lo+g.r.Int64N(hi-lo+1)) / 100
}

// hex returns 2n lowercase hex digits.
func (g *gen) hex(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(g.r.UintN(256))
	}
	return hex.EncodeToString(b)
}

// queryKSeF is KSeF's query of a client's purchase invoices for a period: how many, and
// their gross total. (In office mode the request must carry a KSeF token that has not
// expired: see office.go.)
func queryKSeF(req map[string]any, g *gen) (int, any) {
	if bad := checkNIP(req); bad != nil {
		return validationError(bad)
	}
	n := g.intn(4, 60)
	return http.StatusOK, map[string]any{
		"invoices":   n,
		"totalGross": g.cents(int64(n)*15_000, int64(n)*900_000),
		"currency":   "PLN",
		"queryId":    "KSEF-Q-" + strings.ToUpper(g.hex(4)),
	}
}
