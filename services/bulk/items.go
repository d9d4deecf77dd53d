package bulk

import (
	"context"
	"fmt"
	"slices"

	"lifeline/models"
	"lifeline/models/apperr"
)

// MaxPage bounds a page of a job's items; DefaultPage is a page's size when none is asked.
const (
	MaxPage     = 500
	DefaultPage = 100
)

// ItemQuery asks for a page of a job's items in order: those after position After (-1:
// from the first), with Status when set, at most Limit.
type ItemQuery struct {
	Status string
	After  int
	Limit  int
}

// Validate returns field messages (status, limit), or nil.
func (q ItemQuery) Validate() map[string]string {
	fields := map[string]string{}
	if q.Status != "" && !slices.Contains(ItemStatuses, q.Status) {
		fields["status"] = "must be one of pending, waiting, done, failed, skipped"
	}
	if q.Limit < 1 || q.Limit > MaxPage {
		fields["limit"] = fmt.Sprintf("must be between 1 and %d", MaxPage)
	}
	if len(fields) == 0 {
		return nil
	}
	return fields
}

// ItemPage is a page of a job's items; Next is the position to ask After for the next page
// (-1: this is the last).
type ItemPage struct {
	Items []models.BulkItem
	Next  int
}

// Summary is a job with its items counted by status.
type Summary struct {
	Job    *models.BulkJob
	Counts map[string]int
}

// Summary returns a job of the organization and its items counted by status (every status
// present, zero or not). Errors: ENOTFOUND.
func (s *Service) Summary(ctx context.Context, orgID, id string) (*Summary, error) {
	job, err := s.jobRow(s.DB.Conn(ctx), orgID, id)
	if err != nil {
		return nil, err
	}
	counts, err := s.countStatuses(s.DB.Conn(ctx), id)
	if err != nil {
		return nil, err
	}
	counted(job, counts)
	return &Summary{Job: job, Counts: counts}, nil
}

// Items returns a page of a job's items (keyset by position). Errors: ENOTFOUND (not the
// organization's job), EINVALID (q's fields).
func (s *Service) Items(ctx context.Context, orgID, id string, q ItemQuery) (*ItemPage, error) {
	if fields := q.Validate(); fields != nil {
		return nil, apperr.Invalid("bulk.items.invalid", fields)
	}
	if _, err := s.get(s.DB.Conn(ctx), orgID, id); err != nil {
		return nil, err
	}
	tx := s.DB.Conn(ctx).Where("bulk_id = ? AND position > ?", id, q.After)
	if q.Status != "" {
		tx = tx.Where("status = ?", q.Status)
	}
	var items []models.BulkItem
	if err := tx.Order("position").Limit(q.Limit + 1).Find(&items).Error; err != nil {
		return nil, err
	}
	page := &ItemPage{Items: items, Next: -1}
	if len(items) > q.Limit {
		page.Items = items[:q.Limit]
		page.Next = page.Items[q.Limit-1].Position
	}
	return page, nil
}

// Outcomes counts a job's acted-on items (done) by their dead letter's status now
// (processing: the retry still runs; pending: it failed again; resolved: it worked), in one
// query. Errors: ENOTFOUND.
func (s *Service) Outcomes(ctx context.Context, orgID, id string) (map[string]int, error) {
	if _, err := s.get(s.DB.Conn(ctx), orgID, id); err != nil {
		return nil, err
	}
	var rows []struct {
		Status string
		N      int
	}
	if err := s.DB.Conn(ctx).Table("dlq_bulk_items AS i").Select("d.status AS status, COUNT(*) AS n").
		Joins("JOIN dead_letter_queue d ON d.id = i.dead_letter_id AND d.organization_id = ?", orgID).
		Where("i.bulk_id = ? AND i.status = ?", id, ItemDone).Group("d.status").Scan(&rows).Error; err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out, nil
}
