//go:build race

package engine_test

// raceDetector: the race detector slows the engine several times; bounds on how fast it
// recovers are looser under it (make test checks the real ones).
const raceDetector = true
