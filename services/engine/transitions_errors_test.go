package engine

import (
	"fmt"
	"time"

	"lifeline/models"
)

// errorRecord makes an error record of step "a" of ex in status (resolution: its resolution
// type, "" for none).
func (f *fixture) errorRecord(ex *models.Execution, status, resolution string) *models.ExecutionError {
	rec := &models.ExecutionError{ID: models.NewID(), OrganizationID: f.org, ExecutionID: ex.ID, StepID: "a", ErrorType: "transient",
		ErrorMessage: "first", Status: status, CreatedAt: f.at, UpdatedAt: f.at}
	if resolution != "" {
		rec.ResolutionType = &resolution
	}
	f.create(rec)
	return rec
}

// errorState is an error record's status, resolution, retries and message.
func (f *fixture) errorState(id string) string {
	var rec models.ExecutionError
	if err := f.db.Conn(f.ctx).First(&rec, "id = ?", id).Error; err != nil {
		f.t.Fatal(err)
	}
	s := rec.Status
	if rec.ResolutionType != nil {
		s += " " + *rec.ResolutionType
	}
	return fmt.Sprintf("%s retries %d: %s", s, rec.RetryCount, rec.ErrorMessage)
}

// errorTransitions are the transitions of execution-error records, each from the status it
// expects and, lost, from another.
func errorTransitions() []transitionCase {
	open := func(f *fixture, lost bool, win, other string) (*models.Execution, *models.ExecutionError) {
		ex := f.execution(models.ExecRunning, nil)
		if lost {
			return ex, f.errorRecord(ex, other, pick(other != models.ErrResolved, "auto_retry", ""))
		}
		return ex, f.errorRecord(ex, win, "")
	}
	return []transitionCase{
		// Lost: the step has no open record (its last one was resolved), so a new one is
		// made and the closed one is left as it was.
		{"RecordError", "retrying retries 0: second", "resolved auto_retry retries 0: first", func(f *fixture, lost bool) (bool, string, error) {
			ex, rec := open(f, lost, models.ErrRetrying, models.ErrResolved)
			var created bool
			_, err := f.in(func(st stateTx) (bool, error) {
				fresh := &models.ExecutionError{ID: models.NewID(), OrganizationID: f.org, ExecutionID: ex.ID, StepID: "a",
					ErrorType: "transient", ErrorMessage: "second"}
				got, c, err := st.errors().RecordError(fresh, map[string]any{"error_message": "second"})
				if err == nil && c != (got.Status == models.ErrPending && got.ID == fresh.ID) {
					err = fmt.Errorf("created %v, but the record returned is %s %s", c, got.ID, got.Status)
				}
				created = c
				return true, err
			})
			return !created, f.errorState(rec.ID), err
		}},
		{"RetryError", "retrying retries 1: first", "dead_letter retries 0: first", func(f *fixture, lost bool) (bool, string, error) {
			_, rec := open(f, lost, models.ErrPending, models.ErrDeadLetter)
			w, err := f.in(func(st stateTx) (bool, error) { return won(st.errors().RetryError(rec.ID, 1, st.now.Add(time.Second))) })
			return w, f.errorState(rec.ID), err
		}},
		{"DeadLetterError", "dead_letter retries 0: first", "resolved auto_retry retries 0: first", func(f *fixture, lost bool) (bool, string, error) {
			_, rec := open(f, lost, models.ErrRetrying, models.ErrResolved)
			w, err := f.in(func(st stateTx) (bool, error) { return won(st.errors().DeadLetterError(rec.ID)) })
			return w, f.errorState(rec.ID), err
		}},
		{"HandOverError", "resolved handled retries 0: first", "dead_letter retries 0: first", func(f *fixture, lost bool) (bool, string, error) {
			_, rec := open(f, lost, models.ErrPending, models.ErrDeadLetter)
			w, err := f.in(func(st stateTx) (bool, error) { return won(st.errors().HandOverError(rec.ID)) })
			return w, f.errorState(rec.ID), err
		}},
		{"ResolveRetried", "resolved auto_retry retries 0: first", "dead_letter retries 0: first", func(f *fixture, lost bool) (bool, string, error) {
			ex, rec := open(f, lost, models.ErrRetrying, models.ErrDeadLetter)
			w, err := f.in(func(st stateTx) (bool, error) { return st.errors().ResolveRetried(ex, "a") })
			return w, f.errorState(rec.ID), err
		}},
		{"SettleError", "resolved skipped retries 0: first", "resolved auto_retry retries 0: first", func(f *fixture, lost bool) (bool, string, error) {
			_, rec := open(f, lost, models.ErrDeadLetter, models.ErrResolved)
			notes := "duplicate"
			w, err := f.in(func(st stateTx) (bool, error) { return won(st.errors().SettleError(rec.ID, "skipped", &notes, nil)) })
			return w, f.errorState(rec.ID), err
		}},
	}
}
