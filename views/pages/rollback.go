package pages

// RollbackVM is the rollback panel of an execution page: each completed step with its
// compensation's status, live while the rollback runs.
type RollbackVM struct {
	Status   string // ROLLING_BACK, ROLLED_BACK, ROLLBACK_FAILED; "" before any rollback
	StartURL string // admins, on a failed execution not rolled back yet
	CSRF     string
	Items    []CompensationVM
}

// CompensationVM is one compensation of a rollback.
type CompensationVM struct {
	ID           string
	StepName     string
	Type         string // api_call, database_operation, notification, manual, none
	Status       string // pending, running, waiting, completed, failed, skipped
	Attempts     int
	Error        string
	Result       string
	Instructions string // manual
	FinishedAt   string
	FinishedText string
	ActionURL    string // admins: retry, skip, confirm
	ExecutionID  string
}

func compensationTone(status string) string {
	switch status {
	case "completed":
		return "step--ok"
	case "failed":
		return "step--danger"
	case "running", "waiting":
		return "step--warn"
	case "skipped":
		return "step--partial"
	}
	return "step--muted"
}
