package demo_test

import (
	"math/rand/v2"
	"testing"

	"lifeline/services/demo"
)

// TestNext: the demo's traffic stops adding work while its office's backlog is full, and
// stops filing VAT returns (which ask the partner) while enough requests wait.
func TestNext(t *testing.T) {
	t.Parallel()
	all := demo.Names()
	for _, c := range []struct {
		name              string
		names             []string
		pending, openAsks int
		want              map[string]bool // what it may pick; nil: it skips
	}{
		{"any of them", all, 0, 0, map[string]bool{demo.BankImport: true, demo.VAT: true, demo.Payroll: true, demo.KSeF: true}},
		{"one short of the backlog", all, demo.Backlog - 1, 0, map[string]bool{demo.BankImport: true, demo.VAT: true, demo.Payroll: true, demo.KSeF: true}},
		{"the backlog full", all, demo.Backlog, 0, nil},
		{"requests waiting", all, 10, demo.AsksBacklog, map[string]bool{demo.BankImport: true, demo.Payroll: true, demo.KSeF: true}},
		{"only VAT, requests waiting", []string{demo.VAT}, 0, demo.AsksBacklog, nil},
		{"none", nil, 0, 0, nil},
	} {
		rnd := rand.New(rand.NewPCG(1, 2))
		seen := map[string]bool{}
		for range 200 {
			got := demo.Next(c.names, c.pending, c.openAsks, rnd)
			if got == "" && c.want != nil || got != "" && !c.want[got] {
				t.Fatalf("%s: picked %q", c.name, got)
			}
			seen[got] = true
		}
		if c.want != nil && len(seen) != len(c.want) {
			t.Errorf("%s: picked %v in 200 turns, want each of %v", c.name, seen, c.want)
		}
	}
}
