// Package periods keeps the periods an accounting office has closed (issue 23): once a month
// is reported, nothing may post into it any more. An admin closes a period for one client or
// for every client, with a note; while it is closed, the engine does not run a step marked
// postsToPeriod for an execution about it (engine: a manual replay is refused, an automatic
// attempt fails unsent as validation / period_closed).
//
// The contract:
//
//   - A period is YYYY-MM, YYYY-Qn or YYYY. A closed quarter covers its months and a closed
//     year its quarters and months (models.ClosedPeriodFor): an execution is blocked when a
//     closed period for its client, or for every client, is its period or contains it. A
//     closed month does not block an execution about its quarter or year (a yearly PIT-4R is
//     filed once every month is closed).
//   - Close validates (apperr.EINVALID with English field messages for
//     views/i18n/locales/formats: the period must parse, the note is required, the client at
//     most 200 characters) and writes nothing on error. Closing a period already closed for
//     that client is apperr.ECONFLICT saying by whom and when. Reopen deletes it; another
//     organization's id, or one reopened meanwhile, is ENOTFOUND.
//   - Closing and reopening are audited (period.closed, period.reopened) in the same
//     transaction.
//
// Role checks are the caller's (handlers: admins write, every member reads).
package periods

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/deadline"
)

const (
	// MaxClient bounds a client's key, in characters.
	MaxClient = 200
	// MaxNote bounds the note, in characters.
	MaxNote = 2000
)

// Closed is a closed period as callers show it.
type Closed struct {
	ID     string
	Period string
	// Client is the client's key; "" for every client.
	Client string
	Note   string
	// ClosedBy is who closed it, as shown (a user's name or e-mail, a token's name).
	ClosedBy     string
	ClosedByType string
	ClosedByID   string
	ClosedAt     time.Time
}

func view(p *models.ClosedPeriod) Closed {
	out := Closed{ID: p.ID, Period: p.Period, Client: p.Client, Note: p.Note, ClosedBy: p.ClosedByName,
		ClosedByType: p.ClosedByType, ClosedAt: p.ClosedAt.UTC()}
	if p.ClosedBy != nil {
		out.ClosedByID = *p.ClosedBy
	}
	return out
}

// Input is what Close takes.
type Input struct {
	Period string
	// Client is the client's key; "" for every client.
	Client string
	Note   string
}

// Service manages the closed periods.
type Service struct {
	db  *models.DB
	now func() time.Time
}

// New returns the service; now is the clock of closed_at (time.Now when nil).
func New(db *models.DB, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{db: db, now: func() time.Time { return now().UTC().Truncate(time.Microsecond) }}
}

// List returns the organization's closed periods, the most recently closed first.
func (s *Service) List(ctx context.Context, orgID string) ([]Closed, error) {
	ps, err := s.db.ClosedPeriods(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make([]Closed, 0, len(ps))
	for i := range ps {
		out = append(out, view(&ps[i]))
	}
	return out, nil
}

// ClosedFor returns what closes period for client in the organization (its own row or every
// client's, for the period or one containing it), or nil when the period is open.
func (s *Service) ClosedFor(ctx context.Context, orgID, client, period string) (*Closed, error) {
	p, err := models.ClosedPeriodFor(s.db.Conn(ctx), orgID, client, period)
	if err != nil || p == nil {
		return nil, err
	}
	v := view(p)
	return &v, nil
}

// Close closes in.Period for in.Client ("" every client). Errors: EINVALID with field
// messages; ECONFLICT when it is already closed for that client (the message says by whom
// and when).
func (s *Service) Close(ctx context.Context, orgID string, actor audit.Actor, in Input) (*Closed, error) {
	if fields := validate(&in); len(fields) > 0 {
		return nil, apperr.Invalid("The closed period has errors.", fields)
	}
	row := models.ClosedPeriod{ID: models.NewID(), OrganizationID: orgID, Period: in.Period, Client: in.Client, Note: in.Note,
		ClosedByType: actor.Type, ClosedAt: s.now()}
	if actor.Type == "" {
		row.ClosedByType = audit.ActorSystem
	}
	if actor.ID != "" {
		id := actor.ID
		row.ClosedBy = &id
	}
	err := s.db.Tx(ctx, func(tx *gorm.DB) error {
		name, err := actorName(tx, orgID, actor)
		if err != nil {
			return err
		}
		row.ClosedByName = name
		won, err := models.ClosePeriod(tx, &row)
		if err != nil {
			return err
		}
		if !won {
			was, err := models.ClosedPeriodAt(tx, orgID, in.Period, in.Client)
			if err != nil {
				return err
			}
			if was == nil { // reopened again meanwhile: say so plainly
				return apperr.Errorf(apperr.ECONFLICT, "The period was changed meanwhile; reload the page and try again.")
			}
			return AlreadyClosed(view(was))
		}
		return audit.Record(tx, audit.Entry{OrganizationID: orgID, Actor: actor, Action: "period.closed", EntityType: "closed_period",
			EntityID: row.ID, At: row.ClosedAt, Details: map[string]any{"period": row.Period, "client": clientDetail(row.Client), "note": row.Note}})
	})
	if err != nil {
		return nil, err
	}
	v := view(&row)
	return &v, nil
}

// AlreadyClosed is the conflict of closing c's period again.
func AlreadyClosed(c Closed) error {
	return apperr.Errorf(apperr.ECONFLICT, "The period %s is already closed for %s (closed by %s on %s).",
		c.Period, ClientText(c.Client), ClosedByText(c.ClosedBy), c.ClosedAt.Format("2006-01-02 15:04 UTC"))
}

// ClientText is the client as the service's English messages name it.
func ClientText(client string) string {
	if client == "" {
		return "every client"
	}
	return "client " + client
}

// ClosedByText is who closed a period, as messages name them.
func ClosedByText(name string) string {
	if name == "" {
		return "the system"
	}
	return name
}

// Reopen reopens the organization's closed period id: the steps it held back may run again
// (a replay; nothing runs by itself). ENOTFOUND for another organization's id, or one
// reopened meanwhile.
func (s *Service) Reopen(ctx context.Context, orgID, id string, actor audit.Actor) (*Closed, error) {
	p, err := s.db.GetClosedPeriod(ctx, orgID, id)
	if err != nil {
		return nil, err
	}
	err = s.db.Tx(ctx, func(tx *gorm.DB) error {
		won, err := models.ReopenPeriod(tx, orgID, id)
		if err != nil {
			return err
		}
		if !won {
			return apperr.NotFound("closed period")
		}
		return audit.Record(tx, audit.Entry{OrganizationID: orgID, Actor: actor, Action: "period.reopened", EntityType: "closed_period",
			EntityID: id, At: s.now(), Details: map[string]any{"period": p.Period, "client": clientDetail(p.Client), "note": p.Note,
				"closedBy": p.ClosedByName, "closedAt": p.ClosedAt.UTC().Format(time.RFC3339)}})
	})
	if err != nil {
		return nil, err
	}
	v := view(p)
	return &v, nil
}

func clientDetail(c string) any {
	if c == "" {
		return nil
	}
	return c
}

// actorName is how actor is shown as the one who closed a period: a user's name (else
// e-mail), an API token's name.
func actorName(tx *gorm.DB, orgID string, actor audit.Actor) (string, error) {
	if actor.ID == "" {
		return "", nil
	}
	switch actor.Type {
	case audit.ActorUser:
		var u models.User
		if err := tx.Select("name", "email").Where("id = ?", actor.ID).First(&u).Error; err != nil {
			if models.IsNotFound(err) {
				return "", nil
			}
			return "", err
		}
		if strings.TrimSpace(u.Name) != "" {
			return u.Name, nil
		}
		return u.Email, nil
	case audit.ActorToken:
		var t models.APIToken
		if err := tx.Select("name").Where("organization_id = ? AND id = ?", orgID, actor.ID).First(&t).Error; err != nil {
			if models.IsNotFound(err) {
				return "", nil
			}
			return "", err
		}
		return "API token " + t.Name, nil
	}
	return "", nil
}

// validate trims and normalizes in (the period as ParsePeriod writes it) and returns its
// field messages.
func validate(in *Input) map[string]string {
	fields := map[string]string{}
	in.Period = strings.TrimSpace(in.Period)
	if in.Period == "" {
		fields["period"] = "is required"
	} else if p, err := deadline.ParsePeriod(in.Period); err != nil {
		fields["period"] = "must be a period: YYYY-MM, YYYY-Qn or YYYY"
	} else {
		in.Period = p.String()
	}
	in.Client = strings.TrimSpace(in.Client)
	switch {
	case !utf8.ValidString(in.Client) || strings.IndexFunc(in.Client, unicode.IsControl) >= 0:
		fields["client"] = "must be one line without control characters"
	case utf8.RuneCountInString(in.Client) > MaxClient:
		fields["client"] = fmt.Sprintf("must be at most %d characters", MaxClient)
	}
	in.Note = strings.TrimSpace(in.Note)
	switch {
	case in.Note == "":
		fields["note"] = "is required"
	case !utf8.ValidString(in.Note) || strings.ContainsRune(in.Note, 0):
		fields["note"] = "must be text"
	case utf8.RuneCountInString(in.Note) > MaxNote:
		fields["note"] = fmt.Sprintf("must be at most %d characters", MaxNote)
	}
	return fields
}
