package demo

import "math/rand/v2"

// Backlog bounds the demo office's open work, so that a demo left running for an afternoon
// keeps a morning's pile, not a thousand rows: while Backlog dead letters wait, the demo's
// traffic skips its turns; while AsksBacklog requests wait for an answer, it starts no VAT
// filing (the one workflow that asks the partner). Both resume as people clear them.
const (
	Backlog     = 100
	AsksBacklog = 8
)

// Next picks the workflow the demo's traffic starts next among names (the demo's workflows
// the organization has), given its pending dead letters and its open requests; "" skips the
// turn.
func Next(names []string, pending, openAsks int, rnd *rand.Rand) string {
	if pending >= Backlog {
		return ""
	}
	var from []string
	for _, n := range names {
		if n != VAT || openAsks < AsksBacklog {
			from = append(from, n)
		}
	}
	if len(from) == 0 {
		return ""
	}
	return from[rnd.IntN(len(from))]
}
