package demo_test

import (
	"testing"
	"time"

	"lifeline/services/checkdigit"
	"lifeline/services/demo"
)

// TestVATAsksThePartner: the VAT workflow asks the partner (admins) to approve a validated
// return above 50 000 zł before it is filed (the step between validation and the filing),
// with four eyes and a timeout two working days before the due date or 48 h; the demo's
// waiting start is a VAT return above the limit, with the client's right NIP.
func TestVATAsksThePartner(t *testing.T) {
	t.Parallel()
	var vat map[string]any
	for _, d := range definitions(t) {
		if d["name"] == demo.VAT {
			vat = d
		}
	}
	var ids []string
	var ask map[string]any
	for _, s := range steps(vat) {
		if s["handler"] == true {
			continue
		}
		ids = append(ids, s["id"].(string))
		if s["id"] == demo.ApprovalStep {
			ask = s
		}
	}
	if len(ids) < 3 || ids[0] != "validate_jpk" || ids[1] != demo.ApprovalStep || ids[2] != "submit_jpk" {
		t.Fatalf("VAT steps %v: the approval must come between the validation and the filing", ids)
	}
	cfg := ask["config"].(map[string]any)
	if ask["type"] != "ask" || cfg["kind"] != "approval" || cfg["fourEyes"] != true {
		t.Errorf("approval step %v", ask)
	}
	if as, _ := cfg["assignees"].([]any); len(as) != 1 || as[0] != "role:admin" {
		t.Errorf("assignees %v", cfg["assignees"])
	}
	if cfg["timeoutMs"] != float64(48*3600*1000) || cfg["timeoutBeforeDue"].(map[string]any)["workingDays"] != float64(2) {
		t.Errorf("timeouts %v %v", cfg["timeoutMs"], cfg["timeoutBeforeDue"])
	}
	above := cfg["onlyAbove"].(map[string]any)
	if above["limit"] != "50000.00" || above["amount"] != "{{ steps.validate_jpk.output.vatDue }}" {
		t.Errorf("onlyAbove %v", above)
	}
	now := time.Date(2026, 11, 25, 7, 0, 0, 0, time.UTC)
	w := demo.Waiting(now)
	if len(w) != 1 || w[0].Workflow != demo.VAT || w[0].Fate != demo.Waits || w[0].FailedStep != demo.ApprovalStep {
		t.Fatalf("waiting starts %+v", w)
	}
	if due := w[0].Input["vatDue"].(float64); due <= 50000 {
		t.Errorf("the waiting return's VAT due %v is not above the limit", due)
	}
	if w[0].Input["period"] != "2026-11" {
		t.Errorf("the waiting return's period %v: the month of now, due next month", w[0].Input["period"])
	}
	if nip := w[0].Input["clientNip"].(string); !checkdigit.NIP(nip) {
		t.Errorf("the waiting return's NIP %q", nip)
	}
}
