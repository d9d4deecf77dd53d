package pages

// stepTitle is a failed step's tooltip: its name, and its id when that differs.
func stepTitle(r DLQRow) string {
	if r.FailedStepID != "" && r.FailedStepID != r.FailedStep {
		return r.FailedStep + " (" + r.FailedStepID + ")"
	}
	return r.FailedStep
}
