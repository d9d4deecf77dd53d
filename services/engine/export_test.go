package engine

// Ungrouped is c with new dead letters left out of failure groups, for
// BenchmarkFailureBranch's baseline.
func Ungrouped(c Config) Config {
	c.ungrouped = true
	return c
}
