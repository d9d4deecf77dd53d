// Package bulk runs one recovery action (retry, retry_full, skip, resolve) over many dead letters in the
// background, at a bounded rate, with a result per item and a way to cancel.
//
// A bulk job is rows in the database (dlq_bulk_jobs, dlq_bulk_items) written in one
// transaction with the items it will act on; a queue job (Queue.EnqueueBulk) works through
// them a batch at a time and asks to run again a second later while items remain. Every
// item's action carries the idempotency key bulk:<job id>, so a batch that a crash
// interrupts and runs again does not act twice on an item. Repair re-queues bulk jobs whose
// queue job was lost.
package bulk

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/engine"
)

// Actions.
const (
	Retry = "retry"
	// RetryFull retries each item's whole workflow: a new execution of it (the only retry
	// a rolled-back execution takes).
	RetryFull = "retry_full"
	Skip      = "skip"
	Resolve   = "resolve"
	// EditRetry sets one field of each item's input to one value (Request.Edit), then
	// retries the item from its failed step: a group's "fix the NIP once for the client".
	EditRetry = "edit_retry"
)

// Actions lists the bulk actions.
var Actions = []string{Retry, RetryFull, Skip, Resolve, EditRetry}

// Edit is an edit_retry's change: the input field at Field (a dot-separated path of object
// keys, e.g. "clientNip" or "client.nip") gets Value.
type Edit struct {
	Field string `json:"field"`
	Value any    `json:"value"`
}

// Redactor shows an execution's input as the fix form does, secrets masked
// (redact.Redactor), and says which keys are secret.
type Redactor interface {
	JSON(raw []byte) []byte
	Match(key string) bool
}

// MaxItems bounds one bulk job.
const MaxItems = 10000

// Item statuses.
const (
	ItemPending = "pending"
	ItemDone    = "done"
	ItemFailed  = "failed"
	ItemSkipped = "skipped" // cancelled before it was reached
	// ItemWaiting: its target's circuit breaker is open; it goes back to pending when the
	// breaker lets calls through again (nothing is called meanwhile).
	ItemWaiting = "waiting"
)

// ItemStatuses lists the item statuses.
var ItemStatuses = []string{ItemPending, ItemWaiting, ItemDone, ItemFailed, ItemSkipped}

// Recoverer acts on one dead letter (the engine).
type Recoverer interface {
	Replay(ctx context.Context, r engine.ReplayRequest) (*engine.ReplayResult, error)
	Settle(ctx context.Context, r engine.SettleRequest) (*engine.ReplayResult, error)
}

// Queue runs a bulk job's next batch (now, or after a second).
type Queue interface {
	EnqueueBulk(ctx context.Context, id string) error
}

// Service creates and runs bulk jobs.
type Service struct {
	DB     *models.DB
	Engine Recoverer
	Queue  Queue
	// Rate, when set, overrides every organization's bulk rate (items a second; tests and
	// benchmarks). Unset, a job acts at its organization's rate (models.BulkRate).
	Rate int
	// Now is the clock of progress times (default time.Now).
	Now func() time.Time
	// Redact masks the inputs an edit_retry changes (required for that action: without it
	// each item fails).
	Redact Redactor
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// rate is how many items a second the organization's jobs act on.
func (s *Service) rate(ctx context.Context, orgID string) (int, error) {
	if s.Rate > 0 {
		return s.Rate, nil
	}
	return s.DB.BulkRate(ctx, orgID)
}

// Request asks for a bulk action on the dead letters named by IDs, or else on every pending
// one Filter matches.
type Request struct {
	OrganizationID string
	Action         string
	IDs            []string
	Filter         *models.DLQFilter
	Notes          string
	// Edit is the change of an edit_retry (required for it, refused for the others).
	Edit  *Edit
	Actor audit.Actor
	// IdempotencyKey makes the request idempotent for IdempotencyTTL: the same key with the
	// same request gives the same job (Replayed); with another request it is EINVALID.
	IdempotencyKey string
}

// IdempotencyTTL is how long a bulk job answers for its Idempotency-Key.
const IdempotencyTTL = 24 * time.Hour

// Create validates r, records the job with its items and queues it. Errors: EINVALID with
// field messages (action, ids, filter, resolutionNotes); an id that is not one of the
// organization's dead letters is an EINVALID on that id.
func (s *Service) Create(ctx context.Context, r Request) (*models.BulkJob, error) {
	job, _, err := s.CreateOnce(ctx, r)
	return job, err
}

// CreateOnce is Create, and says whether the job is an earlier one, given back for a
// repeated Idempotency-Key.
func (s *Service) CreateOnce(ctx context.Context, r Request) (job *models.BulkJob, replayed bool, err error) {
	if r.IdempotencyKey == "" {
		job, err = s.create(ctx, r, "")
		return job, false, err
	}
	if len(r.IdempotencyKey) > 255 {
		return nil, false, apperr.Invalid("bulk.invalid", map[string]string{"Idempotency-Key": "must be at most 255 characters"})
	}
	hash := requestHash(r)
	if job, err := s.byKey(ctx, r, hash); job != nil || err != nil {
		return job, job != nil, err
	}
	job, err = s.create(ctx, r, hash)
	if err != nil && models.IsUniqueViolation(err) {
		// The same key, sent twice at once: the other request's job answers.
		if job, err := s.byKey(ctx, r, hash); job != nil || err != nil {
			return job, job != nil, err
		}
	}
	return job, false, err
}

// byKey is the job an earlier request with r's key made, if it is within IdempotencyTTL
// (an older one gives its key up). A different request with the key is EINVALID.
func (s *Service) byKey(ctx context.Context, r Request, hash string) (*models.BulkJob, error) {
	var job models.BulkJob
	err := s.DB.Conn(ctx).Where("organization_id = ? AND idem_key = ?", r.OrganizationID, r.IdempotencyKey).First(&job).Error
	switch {
	case models.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case !job.CreatedAt.Add(IdempotencyTTL).After(s.now()):
		return nil, s.DB.Conn(ctx).Model(&models.BulkJob{}).Where("id = ?", job.ID).Update("idem_key", nil).Error
	case job.RequestHash == nil || *job.RequestHash != hash:
		return nil, apperr.Invalid("This Idempotency-Key was already used with a different request body.",
			map[string]string{"Idempotency-Key": "was already used with a different request body; use a new key"})
	}
	if err := s.withCounts(s.DB.Conn(ctx), &job); err != nil {
		return nil, err
	}
	return &job, nil
}

// requestHash identifies a bulk request: its action, items or filter, and notes.
func requestHash(r Request) string {
	b, _ := json.Marshal(struct {
		Action string
		IDs    []string
		Filter *models.DLQFilter
		Notes  string
		Edit   *Edit
	}{r.Action, r.IDs, r.Filter, r.Notes, r.Edit})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// items validates r and returns the ids of the items it acts on (a filter's pending items
// now), and the filter as recorded with the job.
func (s *Service) items(ctx context.Context, r Request) ([]string, models.JSON, error) {
	fields := map[string]string{}
	if !slices.Contains(Actions, r.Action) {
		fields["action"] = "must be one of retry, retry_full, skip, resolve, edit_retry"
	}
	switch {
	case r.Action == EditRetry && (r.Edit == nil || !ValidPath(r.Edit.Field)):
		fields["field"] = "give the input field to set (a path of keys, e.g. clientNip)"
	case r.Action != EditRetry && r.Edit != nil:
		fields["field"] = "only edit_retry sets a field"
	}
	if len([]rune(r.Notes)) > engine.MaxNotes {
		fields["resolutionNotes"] = fmt.Sprintf("must be at most %d characters", engine.MaxNotes)
	}
	switch {
	case len(r.IDs) > 0 && r.Filter != nil:
		fields["ids"] = "give ids or a filter, not both"
	case len(r.IDs) == 0 && r.Filter == nil:
		fields["ids"] = "give the ids of the items, or a filter"
	case len(r.IDs) > MaxItems:
		fields["ids"] = fmt.Sprintf("must name at most %d items", MaxItems)
	case r.Filter != nil && r.Filter.Status != "" && r.Filter.Status != models.DLQPending:
		fields["filter.status"] = "bulk actions apply to pending items; leave the status out or choose pending"
	}
	if len(fields) > 0 {
		return nil, nil, apperr.Invalid("bulk.invalid", fields)
	}
	ids := r.IDs
	var filterJSON models.JSON
	if r.Filter != nil {
		f := *r.Filter
		f.Status, f.Cursor = models.DLQPending, ""
		var err error
		if ids, err = s.DB.DLQIDs(ctx, r.OrganizationID, f, MaxItems+1); err != nil {
			return nil, nil, err
		}
		if len(ids) > MaxItems {
			return nil, nil, apperr.Invalid("bulk.invalid", map[string]string{"filter": fmt.Sprintf("matches more than %d items; narrow it", MaxItems)})
		}
		filterJSON = models.MustJSON(f)
	} else {
		ids = dedupe(ids)
		for i, id := range ids {
			if u, err := uuid.Parse(id); err != nil || u.String() != id {
				fields[fmt.Sprintf("ids[%d]", i)] = "is not a dead letter id (a UUID)"
			}
		}
		if len(fields) > 0 {
			return nil, nil, apperr.Invalid("bulk.invalid", fields)
		}
		known, err := s.DB.DLQOwned(ctx, r.OrganizationID, ids)
		if err != nil {
			return nil, nil, err
		}
		for i, id := range ids {
			if !known[id] {
				fields[fmt.Sprintf("ids[%d]", i)] = "is not a dead letter of this organization"
			}
		}
		if len(fields) > 0 {
			return nil, nil, apperr.Invalid("bulk.invalid", fields)
		}
	}
	if len(ids) == 0 {
		return nil, nil, apperr.Invalid("bulk.invalid", map[string]string{"filter": "matches no pending item"})
	}
	if r.Action == EditRetry {
		if err := s.checkEdit(ctx, r.OrganizationID, ids, r.Edit.Field); err != nil {
			return nil, nil, err
		}
	}
	return ids, filterJSON, nil
}

// Preview validates r as Create does and returns the ids of the items it would act on (a
// filter's newest first), recording nothing: what a person confirms before a bulk action
// starts.
func (s *Service) Preview(ctx context.Context, r Request) ([]string, error) {
	ids, _, err := s.items(ctx, r)
	return ids, err
}

func (s *Service) create(ctx context.Context, r Request, hash string) (*models.BulkJob, error) {
	ids, filterJSON, err := s.items(ctx, r)
	if err != nil {
		return nil, err
	}
	now := s.now()
	job := &models.BulkJob{ID: models.NewID(), OrganizationID: r.OrganizationID, Action: r.Action, Filter: filterJSON,
		Status: models.BulkQueued, Total: len(ids), CreatedAt: now, UpdatedAt: now}
	if r.Notes != "" {
		job.Notes = &r.Notes
	}
	if r.Edit != nil {
		job.Edit = models.MustJSON(r.Edit)
	}
	if r.Actor.Type == audit.ActorUser && r.Actor.ID != "" {
		job.CreatedBy = &r.Actor.ID
	}
	if r.IdempotencyKey != "" {
		job.IdemKey, job.RequestHash = &r.IdempotencyKey, &hash
	}
	var keys map[string]string
	if r.Action == Retry || r.Action == RetryFull {
		if keys, err = s.breakerKeys(ctx, r.OrganizationID, ids); err != nil {
			return nil, err
		}
	}
	err = s.DB.Tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Create(job).Error; err != nil {
			return err
		}
		items := make([]models.BulkItem, len(ids))
		for i, id := range ids {
			items[i] = models.BulkItem{BulkID: job.ID, DeadLetterID: id, Position: i, Status: ItemPending, UpdatedAt: now}
			if k, ok := keys[id]; ok {
				items[i].BreakerKey = &k
			}
		}
		if err := tx.CreateInBatches(items, 500).Error; err != nil {
			return err
		}
		return audit.Record(tx, audit.Entry{OrganizationID: r.OrganizationID, Actor: r.Actor, Action: "dlq.bulk",
			EntityType: "dlq_bulk_job", EntityID: job.ID, At: now,
			Details: map[string]any{"action": r.Action, "total": len(ids), "byFilter": r.Filter != nil}})
	})
	if err != nil {
		return nil, err
	}
	if err := s.Queue.EnqueueBulk(ctx, job.ID); err != nil {
		return nil, err // the job is recorded: Repair queues it
	}
	return job, nil
}

func (s *Service) act(ctx context.Context, job *models.BulkJob, dlqID string, actor audit.Actor, notes string) (*engine.ReplayResult, error) {
	key := "bulk:" + job.ID
	switch job.Action {
	case Retry:
		return s.Engine.Replay(ctx, engine.ReplayRequest{OrganizationID: job.OrganizationID, DeadLetterID: dlqID, Mode: engine.ReplayFromFailed,
			Notes: notes, Actor: actor, IdempotencyKey: key})
	case RetryFull:
		return s.Engine.Replay(ctx, engine.ReplayRequest{OrganizationID: job.OrganizationID, DeadLetterID: dlqID, Mode: engine.ReplayFull,
			Notes: notes, Actor: actor, IdempotencyKey: key})
	case EditRetry:
		input, err := s.edited(ctx, job, dlqID)
		if err != nil {
			return nil, err
		}
		return s.Engine.Replay(ctx, engine.ReplayRequest{OrganizationID: job.OrganizationID, DeadLetterID: dlqID, Mode: engine.ReplayFromFailed,
			Input: input, Notes: notes, Actor: actor, IdempotencyKey: key})
	case Skip, Resolve:
		status := models.DLQResolved
		if job.Action == Skip {
			status = models.DLQSkipped
		}
		return s.Engine.Settle(ctx, engine.SettleRequest{OrganizationID: job.OrganizationID, DeadLetterID: dlqID, Status: status,
			Notes: notes, Actor: actor, IdempotencyKey: key})
	}
	return nil, apperr.Errorf(apperr.EINVALID, "unknown bulk action %q", job.Action)
}

// checkEdit refuses an edit_retry of field on the items ids: EINVALID on "field" when it
// is a secret's (masked: never shown, so never set for many at once) or when an item's
// input has no such field (a field is changed, never added).
func (s *Service) checkEdit(ctx context.Context, orgID string, ids []string, field string) error {
	if s.Redact == nil {
		return apperr.Invalid("bulk.invalid", map[string]string{"action": "edit_retry is not available here"})
	}
	if Masked(s.Redact, field) {
		return apperr.Invalid("bulk.invalid", map[string]string{"field": "is a secret field (masked); edit it on each item"})
	}
	missing := 0
	for start := 0; start < len(ids); start += 500 {
		var inputs [][]byte
		if err := s.DB.Conn(ctx).Table("dead_letter_queue d").Joins("JOIN workflow_executions e ON e.id = d.execution_id").
			Where("d.organization_id = ? AND d.id IN ?", orgID, ids[start:min(len(ids), start+500)]).Pluck("e.input", &inputs).Error; err != nil {
			return err
		}
		for _, raw := range inputs {
			var doc any
			_ = json.Unmarshal(raw, &doc)
			if _, ok := GetPath(doc, field); !ok {
				missing++
			}
		}
	}
	if missing > 0 {
		return apperr.Invalid("bulk.invalid", map[string]string{"field": fmt.Sprintf("is not in the input of %d of the items", missing)})
	}
	return nil
}

// edited is the input an edit_retry replays the dead letter with: its execution's input as
// the fix form shows it (secrets masked, which the replay keeps as stored), with the job's
// field set. A secret field is refused (EINVALID), as is an input without the field.
func (s *Service) edited(ctx context.Context, job *models.BulkJob, dlqID string) (json.RawMessage, error) {
	var e Edit
	if err := json.Unmarshal(job.Edit, &e); err != nil || !ValidPath(e.Field) {
		return nil, apperr.Invalid("bulk.invalid", map[string]string{"field": "the job names no field to set"})
	}
	if s.Redact == nil {
		return nil, apperr.Errorf(apperr.EINVALID, "edit_retry is not available here")
	}
	if Masked(s.Redact, e.Field) {
		return nil, apperr.Invalid("bulk.invalid", map[string]string{"field": "is a secret field; edit it on each item"})
	}
	var ex models.Execution
	err := s.DB.Conn(ctx).Table("workflow_executions e").Select("e.id, e.input").
		Joins("JOIN dead_letter_queue d ON d.execution_id = e.id").
		Where("d.organization_id = ? AND d.id = ?", job.OrganizationID, dlqID).Take(&ex).Error
	if models.IsNotFound(err) {
		return nil, apperr.NotFound("dead letter")
	}
	if err != nil {
		return nil, err
	}
	var input any
	if err := json.Unmarshal(s.Redact.JSON(ex.Input), &input); err != nil {
		return nil, apperr.Errorf(apperr.EINVALID, "the item's input is not a JSON object")
	}
	if !SetPath(input, e.Field, e.Value) {
		return nil, apperr.Invalid("bulk.invalid", map[string]string{"field": "is not in this item's input"})
	}
	return json.Marshal(input)
}

// record stores an item's result: pending → status (done or failed). The job's counts are
// its items' (withCounts), so that the items of one job, acted on at once, write their own
// rows and never queue on the job's (the job's updated_at moves with each batch, Run).
func (s *Service) record(ctx context.Context, bulkID, dlqID, status, msg string, exID *string) error {
	var m *string
	if msg != "" {
		m = &msg
	}
	return s.DB.Conn(ctx).Model(&models.BulkItem{}).Where("bulk_id = ? AND dead_letter_id = ? AND status = ?", bulkID, dlqID, ItemPending).
		Updates(map[string]any{"status": status, "message": m, "execution_id": exID, "updated_at": s.now()}).Error
}

// withCounts sets the job's processed, succeeded and failed counts from its items (done
// and failed), counted in tx: exact whenever it is read. The job's own columns of them are
// no longer written (0 for jobs made since).
func (s *Service) withCounts(tx *gorm.DB, job *models.BulkJob) error {
	counts, err := s.countStatuses(tx, job.ID)
	if err != nil {
		return err
	}
	counted(job, counts)
	return nil
}

// counted sets the job's processed, succeeded and failed counts from its items' counts by
// status.
func counted(job *models.BulkJob, counts map[string]int) {
	job.Succeeded, job.Failed = counts[ItemDone], counts[ItemFailed]
	job.Processed = job.Succeeded + job.Failed
}

func (s *Service) cancelled(ctx context.Context, id string) (bool, error) {
	var job models.BulkJob
	if err := s.DB.Conn(ctx).Select("status").First(&job, "id = ?", id).Error; err != nil {
		return false, err
	}
	return job.Status == models.BulkCancelled, nil
}

// Cancel stops a queued or running job of the organization: the items not reached yet are
// marked skipped. Errors: ENOTFOUND; ECONFLICT when it already finished.
func (s *Service) Cancel(ctx context.Context, orgID, id string, actor audit.Actor) error {
	now := s.now()
	return s.DB.Tx(ctx, func(tx *gorm.DB) error {
		r := tx.Model(&models.BulkJob{}).Where("organization_id = ? AND id = ? AND status IN ?", orgID, id, []string{models.BulkQueued, models.BulkRunning}).
			Updates(map[string]any{"status": models.BulkCancelled, "finished_at": now, "updated_at": now})
		if r.Error != nil {
			return r.Error
		}
		if r.RowsAffected == 0 {
			if _, err := s.get(tx, orgID, id); err != nil {
				return err
			}
			return apperr.Errorf(apperr.ECONFLICT, "bulk.finished")
		}
		msg := "cancelled"
		if err := tx.Model(&models.BulkItem{}).Where("bulk_id = ? AND status IN ?", id, []string{ItemPending, ItemWaiting}).
			Updates(map[string]any{"status": ItemSkipped, "message": &msg, "updated_at": now}).Error; err != nil {
			return err
		}
		return audit.Record(tx, audit.Entry{OrganizationID: orgID, Actor: actor, Action: "dlq.bulk_cancelled",
			EntityType: "dlq_bulk_job", EntityID: id, At: now})
	})
}

// Get returns a job of the organization and its items in order. Errors: ENOTFOUND.
func (s *Service) Get(ctx context.Context, orgID, id string) (*models.BulkJob, []models.BulkItem, error) {
	job, err := s.get(s.DB.Conn(ctx), orgID, id)
	if err != nil {
		return nil, nil, err
	}
	var items []models.BulkItem
	if err := s.DB.Conn(ctx).Where("bulk_id = ?", id).Order("position").Find(&items).Error; err != nil {
		return nil, nil, err
	}
	return job, items, nil
}

func (s *Service) get(tx *gorm.DB, orgID, id string) (*models.BulkJob, error) {
	job, err := s.jobRow(tx, orgID, id)
	if err != nil {
		return nil, err
	}
	return job, s.withCounts(tx, job)
}

// jobRow is a job of the organization as its row holds it (processed, succeeded and failed
// not counted: withCounts). Errors: ENOTFOUND.
func (s *Service) jobRow(tx *gorm.DB, orgID, id string) (*models.BulkJob, error) {
	var job models.BulkJob
	if err := tx.Where("organization_id = ? AND id = ?", orgID, id).First(&job).Error; err != nil {
		if models.IsNotFound(err) {
			return nil, apperr.NotFound("bulk job")
		}
		return nil, err
	}
	return &job, nil
}

// Repair queues again the unfinished jobs that made no progress for a minute (their queue
// job was lost). The queue skips a job that is already waiting.
func (s *Service) Repair(ctx context.Context) error {
	var ids []string
	if err := s.DB.Conn(ctx).Model(&models.BulkJob{}).Where("status IN ? AND updated_at < ?",
		[]string{models.BulkQueued, models.BulkRunning}, s.now().Add(-time.Minute)).Limit(100).Pluck("id", &ids).Error; err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		errs = append(errs, s.Queue.EnqueueBulk(ctx, id))
	}
	return errors.Join(errs...)
}

func messageOf(err error) string {
	var me *apperr.Error
	if errors.As(err, &me) {
		return me.Message
	}
	return err.Error()
}

func dedupe(ids []string) []string {
	seen := map[string]bool{}
	out := ids[:0:0]
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
