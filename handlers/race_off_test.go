//go:build !race

package handlers_test

// raceDetector: the race detector slows SQLite work about tenfold; tests of volume use less.
const raceDetector = false
