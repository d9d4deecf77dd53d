package pages

// stepTitle is a failed step's tooltip: its name, and its id when that differs.
func stepTitle(r DLQRow) string {
	if r.FailedStepID != "" && r.FailedStepID != r.FailedStep {
		return r.FailedStep + " (" + r.FailedStepID + ")"
	}
	return r.FailedStep
}

// ariaBool is an ARIA true/false state (aria-expanded, aria-pressed).
func ariaBool(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
