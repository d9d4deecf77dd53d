// Package credentials keeps the organization's credentials: secrets an admin stores once by
// name (a service's token, an API key) and steps read as {{ credentials.<name> }}, so that
// replacing an expired token is one change for every execution, not an edit of each input.
//
// The contract:
//
//   - A value is sealed at rest (models.Credential) and never shown again after it is
//     saved: List returns only its last four characters, when it was changed and by whom.
//     Values returns the values in clear, for the engine only.
//   - Save adds a credential or replaces the value of the one with that name (a guarded
//     change: a credential replaced or deleted meanwhile is apperr.ECONFLICT). Bad input
//     is apperr.EINVALID with English field messages (views/i18n/locales/formats), and
//     nothing is written. Delete removes one; another organization's id is ENOTFOUND.
//   - Every change is audited by name, never with the value.
//
// Role checks are the caller's (handlers: admins only).
package credentials

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
)

const (
	// MinValueLength is the shortest value: shorter ones could not be masked by their value
	// in errors and traces (redact.MinValueLength), and no service's token is that short.
	MinValueLength = 8
	// MaxValueLength is the longest value, in characters.
	MaxValueLength = 4096
	// shown is how many of a value's last characters pages show.
	shown = 4
)

// validName is a name a template can read as credentials.<name>.
var validName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,63}$`)

// Credential is a credential as pages show it: never its value.
type Credential struct {
	ID   string
	Name string
	// Last4 is the value's last four characters.
	Last4     string
	UpdatedBy string // the user's or API token's id; "" for the system
	CreatedAt time.Time
	UpdatedAt time.Time
}

func view(c *models.Credential) Credential {
	out := Credential{ID: c.ID, Name: c.Name, Last4: c.Last4, CreatedAt: c.CreatedAt.UTC(), UpdatedAt: c.UpdatedAt.UTC()}
	if c.UpdatedBy != nil {
		out.UpdatedBy = *c.UpdatedBy
	}
	return out
}

// Input is what Save takes.
type Input struct {
	Name  string
	Value string
}

// Service manages the credentials.
type Service struct {
	db  *models.DB
	now func() time.Time
}

// New returns the service; now is the clock of created_at and updated_at (time.Now when nil).
func New(db *models.DB, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{db: db, now: func() time.Time { return now().UTC().Truncate(time.Microsecond) }}
}

// List returns the organization's credentials by name, without their values.
func (s *Service) List(ctx context.Context, orgID string) ([]Credential, error) {
	cs, err := s.db.Credentials(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make([]Credential, 0, len(cs))
	for i := range cs {
		out = append(out, view(&cs[i]))
	}
	return out, nil
}

// Values returns the organization's credentials by name, in clear (an empty map when it has
// none). Only the engine reads them, to render step templates; callers mask them in what
// they store or show.
func (s *Service) Values(ctx context.Context, orgID string) (map[string]string, error) {
	cs, err := s.db.Credentials(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(cs))
	for _, c := range cs {
		out[c.Name] = c.Value
	}
	return out, nil
}

// Save adds the credential in.Name with in.Value, or replaces the value of the one the
// organization already has by that name; created says which. Errors: EINVALID with field
// messages; ECONFLICT when the credential was replaced or deleted while this one was saved.
func (s *Service) Save(ctx context.Context, orgID string, actor audit.Actor, in Input) (c *Credential, created bool, err error) {
	if fields := validate(&in); len(fields) > 0 {
		return nil, false, apperr.Invalid("The credential has errors.", fields)
	}
	now := s.now()
	row := models.Credential{ID: models.NewID(), OrganizationID: orgID, Name: in.Name, Value: in.Value, Last4: last4(in.Value),
		CreatedAt: now, UpdatedAt: now}
	if actor.ID != "" {
		id := actor.ID
		row.UpdatedBy = &id
	}
	err = s.db.Tx(ctx, func(tx *gorm.DB) error {
		was, err := s.db.CredentialByName(tx, orgID, in.Name)
		switch {
		case apperr.ErrorCode(err) == apperr.ENOTFOUND:
			created = true
			if err := s.db.CreateCredential(tx, &row); err != nil {
				return err
			}
		case err != nil:
			return err
		default:
			row.ID, row.CreatedAt = was.ID, was.CreatedAt
			won, err := s.db.ReplaceCredential(tx, &row, was.UpdatedAt)
			if err != nil {
				return err
			}
			if !won {
				return apperr.Errorf(apperr.ECONFLICT, "The credential was changed meanwhile; reload the page and try again.")
			}
		}
		action := "credential.replaced"
		if created {
			action = "credential.created"
		}
		return audit.Record(tx, audit.Entry{OrganizationID: orgID, Actor: actor, Action: action, EntityType: "credential",
			EntityID: row.ID, At: now, Details: map[string]any{"name": row.Name}})
	})
	if err != nil {
		return nil, false, err
	}
	v := view(&row)
	return &v, created, nil
}

// Delete deletes the organization's credential id, or ENOTFOUND. Steps that read it fail
// from then on (their template names a credential that is not there).
func (s *Service) Delete(ctx context.Context, orgID, id string, actor audit.Actor) (*Credential, error) {
	c, err := s.db.GetCredential(ctx, orgID, id)
	if err != nil {
		return nil, err
	}
	err = s.db.Tx(ctx, func(tx *gorm.DB) error {
		if err := s.db.DeleteCredential(tx, orgID, id); err != nil {
			return err
		}
		return audit.Record(tx, audit.Entry{OrganizationID: orgID, Actor: actor, Action: "credential.deleted", EntityType: "credential",
			EntityID: id, At: s.now(), Details: map[string]any{"name": c.Name}})
	})
	if err != nil {
		return nil, err
	}
	v := view(c)
	return &v, nil
}

// validate trims in and returns its field messages, English, for
// views/i18n/locales/formats.
func validate(in *Input) map[string]string {
	fields := map[string]string{}
	in.Name = strings.TrimSpace(in.Name)
	switch {
	case in.Name == "":
		fields["name"] = "is required"
	case !validName.MatchString(in.Name):
		fields["name"] = "must start with a letter and have at most 64 letters, digits or '_'"
	}
	in.Value = strings.TrimSpace(in.Value)
	n := utf8.RuneCountInString(in.Value)
	switch {
	case in.Value == "":
		fields["value"] = "is required"
	case !utf8.ValidString(in.Value) || strings.IndexFunc(in.Value, unicode.IsControl) >= 0:
		fields["value"] = "must be one line without control characters"
	case n < MinValueLength:
		fields["value"] = fmt.Sprintf("must be at least %d characters", MinValueLength)
	case n > MaxValueLength:
		fields["value"] = fmt.Sprintf("must be at most %d characters", MaxValueLength)
	}
	return fields
}

// last4 is what pages show of a value.
func last4(v string) string {
	r := []rune(v)
	return string(r[max(0, len(r)-shown):])
}
