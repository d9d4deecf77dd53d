package models

// ErrCodeFallback is the error code of a step's attempt that its open circuit breaker
// refused and whose fallback step ran instead (issue 22): the attempt ends FAILED without a
// request, and the fallback's attempt names it (HandlesAttemptID).
const ErrCodeFallback = "circuit_open_fallback"
