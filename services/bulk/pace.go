package bulk

import (
	"cmp"
	"context"
	"encoding/json"
	"sync"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/breaker"
)

// Pacing (issue 22). A job acts at its organization's rate (models.BulkRate, items a second)
// a batch at a time: Run acts on one batch and says how long until the next is due, and the
// queue job runs again then (River's scheduling: nothing sleeps). A batch that starts late
// (the queue picked it up after its time) is larger by the time it lost, up to a second's
// worth, so the job keeps its rate.
//
// A retry's items carry the scope key of the circuit breaker in front of their failed step
// (BreakerKey). Before each batch the job reads those breakers: the items behind an open one
// move to waiting (nothing is called, so nothing goes back to the DLQ) and the job runs again
// when the breaker may half-open; behind a half-open one, a batch sends at most the
// breaker's trial allowance (breaker.Slots); once the breaker lets calls through, its items
// are pending again.

// maxPause bounds how long a job whose every item waits sleeps before it reads its breakers
// again (an admin may reset a breaker before its reset timeout).
const maxPause = 30 * time.Second

// batchTime bounds the time one batch acts (the next starts at once when it ran out).
const batchTime = time.Second

// Outcome is what one run of a job did: More, items remain (pending or waiting); Wait, how
// long until its next batch is due.
type Outcome struct {
	More bool
	Wait time.Duration
}

// Step acts on the job's next batch (Run) and reports whether items remain.
func (s *Service) Step(ctx context.Context, id string) (more bool, err error) {
	o, err := s.Run(ctx, id)
	return o.More, err
}

// Run acts on the job's next batch: up to a second's worth of items at the organization's
// rate (more when the batch started late), for at most a second, skipping the items whose
// breaker is open or whose half-open breaker's trial allowance this batch has used. It
// returns when to run again. A job that is finished or cancelled does nothing (More false);
// an error is the database's (run it again: every item's action is idempotent).
func (s *Service) Run(ctx context.Context, id string) (Outcome, error) {
	var job models.BulkJob
	if err := s.DB.Conn(ctx).First(&job, "id = ?", id).Error; err != nil {
		if models.IsNotFound(err) {
			return Outcome{}, nil
		}
		return Outcome{}, err
	}
	if job.Status != models.BulkQueued && job.Status != models.BulkRunning {
		return Outcome{}, nil
	}
	rate, err := s.rate(ctx, job.OrganizationID)
	if err != nil {
		return Outcome{}, err
	}
	now := s.now()
	budget := rate
	if job.PacedAt != nil {
		if late := now.Sub(*job.PacedAt) - time.Second; late > 0 {
			budget += int(float64(rate) * min(late.Seconds(), 1))
		}
	}
	g, err := s.gates(ctx, &job, now)
	if err != nil {
		return Outcome{}, err
	}
	err = s.DB.Tx(ctx, func(tx *gorm.DB) error {
		if _, err := WaitItems(tx, id, g.blockedKeys(), now); err != nil {
			return err
		}
		if _, err := WakeItems(tx, id, g.blockedKeys(), now); err != nil {
			return err
		}
		return tx.Model(&models.BulkJob{}).Where("id = ? AND status IN ?", id, []string{models.BulkQueued, models.BulkRunning}).
			Updates(map[string]any{"status": models.BulkRunning, "paced_at": now, "updated_at": now}).Error
	})
	if err != nil {
		return Outcome{}, err
	}
	var items []models.BulkItem
	if err := s.DB.Conn(ctx).Where("bulk_id = ? AND status = ?", id, ItemPending).Order("position").Limit(budget).Find(&items).Error; err != nil {
		return Outcome{}, err
	}
	if err := s.actOn(ctx, &job, items, g); err != nil {
		return Outcome{}, err
	}
	counts, err := s.countStatuses(s.DB.Conn(ctx), id)
	if err != nil {
		return Outcome{}, err
	}
	after := s.now()
	switch {
	case counts[ItemPending] > 0:
		return Outcome{More: true, Wait: max(0, now.Add(time.Second).Sub(after))}, nil
	case counts[ItemWaiting] > 0:
		return Outcome{More: true, Wait: min(max(g.until.Sub(after), time.Second), maxPause)}, nil
	}
	return Outcome{}, s.DB.Conn(ctx).Model(&models.BulkJob{}).Where("id = ? AND status = ?", id, models.BulkRunning).
		Updates(map[string]any{"status": models.BulkDone, "finished_at": after, "updated_at": after}).Error
}

// parallel is how many of a batch's items are acted on at once: a replay waits on the
// database for most of its time, so one at a time would cap a job far below its rate.
const parallel = 8

// actOn acts on items (parallel at once, taken in order) within batchTime, leaving pending
// those over a half-open breaker's allowance and those not reached in time. It stops when
// the job was cancelled. Every goroutine it starts has ended when it returns.
func (s *Service) actOn(ctx context.Context, job *models.BulkJob, items []models.BulkItem, g *gates) error {
	started := time.Now()
	actor := audit.Actor{Type: audit.ActorSystem}
	if job.CreatedBy != nil {
		actor = audit.Actor{Type: audit.ActorUser, ID: *job.CreatedBy}
	}
	notes := ""
	if job.Notes != nil {
		notes = *job.Notes
	}
	sent := map[string]int{}
	todo := items[:0:0]
	for _, it := range items {
		if it.BreakerKey != nil {
			if slots, ok := g.trials[*it.BreakerKey]; ok {
				if sent[*it.BreakerKey] >= slots {
					continue // the half-open breaker's allowance: a later batch
				}
				sent[*it.BreakerKey]++
			}
		}
		todo = append(todo, it)
	}
	if cancelled, err := s.cancelled(ctx, job.ID); err != nil || cancelled {
		return err
	}
	var (
		mu       sync.Mutex
		next     int
		firstErr error
		stop     bool
	)
	take := func() (models.BulkItem, bool) {
		mu.Lock()
		defer mu.Unlock()
		if stop || next >= len(todo) || (next > 0 && (time.Since(started) > batchTime || ctx.Err() != nil)) {
			return models.BulkItem{}, false
		}
		next++
		if next%50 == 0 { // a cancel stops the batch within 50 items
			if cancelled, err := s.cancelled(ctx, job.ID); err != nil || cancelled {
				stop, firstErr = true, cmp.Or(firstErr, err)
				return models.BulkItem{}, false
			}
		}
		return todo[next-1], true
	}
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		stop, firstErr = true, cmp.Or(firstErr, err)
	}
	var wg sync.WaitGroup
	for range min(parallel, len(todo)) {
		wg.Go(func() {
			for {
				it, ok := take()
				if !ok {
					return
				}
				res, aerr := s.act(ctx, job, it.DeadLetterID, actor, notes)
				status, msg := ItemDone, ""
				var exID *string
				switch {
				case aerr == nil:
					exID = &res.ExecutionID
				case isInternal(aerr):
					fail(aerr) // the database: run the batch again
					return
				default:
					status, msg = ItemFailed, messageOf(aerr)
				}
				if err := s.record(ctx, job.ID, it.DeadLetterID, status, msg, exID); err != nil {
					fail(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// gates is what the breakers in front of a job's items allow now: blocked, the keys of the
// open ones (until, the earliest time one may half-open); trials, the half-open ones' (or
// those due to half-open) trial allowance per batch.
type gates struct {
	blocked map[string]time.Time
	until   time.Time
	trials  map[string]int
}

func (g *gates) blockedKeys() []string {
	out := make([]string, 0, len(g.blocked))
	for k := range g.blocked {
		out = append(out, k)
	}
	return out
}

// gates reads the breakers in front of the job's remaining items.
func (s *Service) gates(ctx context.Context, job *models.BulkJob, now time.Time) (*gates, error) {
	g := &gates{blocked: map[string]time.Time{}, trials: map[string]int{}}
	var keys []string
	if err := s.DB.Conn(ctx).Model(&models.BulkItem{}).Where("bulk_id = ? AND status IN ? AND breaker_key IS NOT NULL", job.ID,
		[]string{ItemPending, ItemWaiting}).Distinct("breaker_key").Pluck("breaker_key", &keys).Error; err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return g, nil
	}
	var bs []models.CircuitBreaker
	if err := s.DB.Conn(ctx).Where("organization_id = ? AND scope_key IN ?", job.OrganizationID, keys).Find(&bs).Error; err != nil {
		return nil, err
	}
	for _, b := range bs {
		v := breaker.Admit(breaker.State{State: b.State, OpenedAt: b.OpenedAt, HalfOpenedAt: b.HalfOpenedAt, Forced: b.Forced,
			ResetTimeout: time.Duration(b.ResetTimeoutMs) * time.Millisecond, HalfOpenRequests: b.HalfOpenRequests}, now)
		switch {
		case !v.Run:
			g.blocked[b.ScopeKey] = v.Until
			if g.until.IsZero() || v.Until.Before(g.until) {
				g.until = v.Until
			}
		case v.Trial:
			g.trials[b.ScopeKey] = breaker.Slots(b.HalfOpenRequests)
		}
	}
	return g, nil
}

// WaitItems moves the job's pending items behind the given (open) breakers to waiting:
// pending → waiting, and only from pending. It returns how many moved.
func WaitItems(tx *gorm.DB, bulkID string, keys []string, now time.Time) (int64, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	r := tx.Model(&models.BulkItem{}).Where("bulk_id = ? AND status = ? AND breaker_key IN ?", bulkID, ItemPending, keys).
		Updates(map[string]any{"status": ItemWaiting, "updated_at": now})
	return r.RowsAffected, r.Error
}

// WakeItems moves the job's waiting items whose breaker is not among the blocked keys back
// to pending: waiting → pending, and only from waiting. It returns how many moved.
func WakeItems(tx *gorm.DB, bulkID string, blocked []string, now time.Time) (int64, error) {
	q := tx.Model(&models.BulkItem{}).Where("bulk_id = ? AND status = ?", bulkID, ItemWaiting)
	if len(blocked) > 0 {
		q = q.Where("breaker_key IS NULL OR breaker_key NOT IN ?", blocked)
	}
	r := q.Updates(map[string]any{"status": ItemPending, "updated_at": now})
	return r.RowsAffected, r.Error
}

// breakerKeys returns the scope key of the circuit breaker in front of each dead letter's
// failed step: the breaker recorded in its step states when it failed (a host's, or its
// step's), else its step's key ("step:<workflow>:<step>").
func (s *Service) breakerKeys(ctx context.Context, orgID string, ids []string) (map[string]string, error) {
	type row struct {
		ID           string
		WorkflowID   string
		FailedStepID string
		StepStates   models.JSON
	}
	type stepState struct {
		StepID  string `json:"stepId"`
		Breaker *struct {
			ID string `json:"id"`
		} `json:"breaker"`
	}
	keys := make(map[string]string, len(ids))
	byBreaker := map[string][]string{}
	for from := 0; from < len(ids); from += 500 {
		var rows []row
		if err := s.DB.Conn(ctx).Model(&models.DeadLetter{}).Select("id, workflow_id, failed_step_id, step_states").
			Where("organization_id = ? AND id IN ?", orgID, ids[from:min(from+500, len(ids))]).Find(&rows).Error; err != nil {
			return nil, err
		}
		for _, r := range rows {
			keys[r.ID] = "step:" + r.WorkflowID + ":" + r.FailedStepID
			var states []stepState
			if json.Unmarshal(r.StepStates, &states) != nil {
				continue
			}
			for _, st := range states {
				if st.StepID == r.FailedStepID && st.Breaker != nil && st.Breaker.ID != "" {
					byBreaker[st.Breaker.ID] = append(byBreaker[st.Breaker.ID], r.ID)
				}
			}
		}
	}
	if len(byBreaker) == 0 {
		return keys, nil
	}
	bids := make([]string, 0, len(byBreaker))
	for id := range byBreaker {
		bids = append(bids, id)
	}
	var bs []models.CircuitBreaker
	if err := s.DB.Conn(ctx).Select("id, scope_key").Where("organization_id = ? AND id IN ?", orgID, bids).Find(&bs).Error; err != nil {
		return nil, err
	}
	for _, b := range bs {
		for _, dl := range byBreaker[b.ID] {
			keys[dl] = b.ScopeKey
		}
	}
	return keys, nil
}

// countStatuses counts the job's items by status.
func (s *Service) countStatuses(tx *gorm.DB, id string) (map[string]int, error) {
	var rows []struct {
		Status string
		N      int
	}
	if err := tx.Model(&models.BulkItem{}).Select("status, COUNT(*) AS n").Where("bulk_id = ?", id).Group("status").Scan(&rows).Error; err != nil {
		return nil, err
	}
	out := make(map[string]int, len(ItemStatuses))
	for _, st := range ItemStatuses {
		out[st] = 0
	}
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out, nil
}

func isInternal(err error) bool { return apperr.ErrorCode(err) == apperr.EINTERNAL }
