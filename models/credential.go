package models

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"lifeline/models/apperr"
)

// Credential is a secret an admin keeps for the organization by name (credentials): steps
// read it as {{ credentials.<name> }}, so replacing it once (an expired token) serves every
// execution from then on. The value is kept sealed at rest; the queries here fill Value in
// clear from Sealed, and only services/credentials and the engine read it.
type Credential struct {
	ID             string
	OrganizationID string
	Name           string
	// Sealed is the stored column: the JSON document {"password": value} whose value the
	// Sealer replaced by an envelope bound to the row (CredentialAAD).
	Sealed JSON `gorm:"column:secret"`
	// Value is the secret in clear. It is never stored as it is.
	Value string `gorm:"-"`
	// Last4 is what pages show of the value: its last four characters.
	Last4 string `gorm:"column:last4"`
	// UpdatedBy is the user or API token that last saved it (nil: the system).
	UpdatedBy *string
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (Credential) TableName() string { return "credentials" }

// CredentialAAD identifies the secret column of a credentials row.
func CredentialAAD(id string) string { return "credentials:" + id + ":secret" }

// ErrCredentialNotSealed is returned when a Sealer is set but left the value in clear: the
// configured secret keys (LIFELINE_REDACT_KEYS) do not match "password".
var ErrCredentialNotSealed = errors.New("the credential was not encrypted: LIFELINE_REDACT_KEYS must match the key \"password\"")

// sealCredential returns the column value of value for the row id.
func (db *DB) sealCredential(id, value string) (JSON, error) {
	raw, err := json.Marshal(map[string]string{dsnKey: value})
	if err != nil {
		return nil, err
	}
	sealed, err := db.Seal(raw, CredentialAAD(id))
	if err != nil {
		return nil, err
	}
	if db.Sealer != nil && !bytes.Contains(sealed, []byte(`"enc:`)) {
		return nil, ErrCredentialNotSealed
	}
	return sealed, nil
}

// openCredential fills c.Value from c.Sealed.
func (db *DB) openCredential(c *Credential) error {
	plain, err := db.Open(c.Sealed, CredentialAAD(c.ID))
	if err != nil {
		return err
	}
	var doc map[string]string
	if err := json.Unmarshal(plain, &doc); err != nil {
		return fmt.Errorf("credential %s: the stored value is not readable: %w", c.ID, err)
	}
	c.Value = doc[dsnKey]
	return nil
}

// Credentials returns the organization's credentials by name, values in clear.
func (db *DB) Credentials(ctx context.Context, orgID string) ([]Credential, error) {
	var out []Credential
	if err := db.Conn(ctx).Where("organization_id = ?", orgID).Order("name").Find(&out).Error; err != nil {
		return nil, err
	}
	for i := range out {
		if err := db.openCredential(&out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// GetCredential returns the organization's credential id (a UUID), or ENOTFOUND.
func (db *DB) GetCredential(ctx context.Context, orgID, id string) (*Credential, error) {
	var c Credential
	if err := db.Conn(ctx).Where("organization_id = ? AND id = ?", orgID, id).First(&c).Error; err != nil {
		if IsNotFound(err) {
			return nil, apperr.NotFound("credential")
		}
		return nil, err
	}
	return &c, db.openCredential(&c)
}

// CredentialByName returns the organization's credential named name with tx (its value
// not opened), or ENOTFOUND.
func (db *DB) CredentialByName(tx *gorm.DB, orgID, name string) (*Credential, error) {
	var c Credential
	if err := tx.Where("organization_id = ? AND name = ?", orgID, name).First(&c).Error; err != nil {
		if IsNotFound(err) {
			return nil, apperr.NotFound("credential")
		}
		return nil, err
	}
	return &c, nil
}

// CredentialNameTaken is the field message of a name another credential of the
// organization took meanwhile.
const CredentialNameTaken = "is already used by another credential"

// CreateCredential inserts c with tx, its value sealed. A name the organization already
// uses is apperr.EINVALID on "name".
func (db *DB) CreateCredential(tx *gorm.DB, c *Credential) error {
	sealed, err := db.sealCredential(c.ID, c.Value)
	if err != nil {
		return err
	}
	c.Sealed = sealed
	err = tx.Create(c).Error
	if err != nil {
		s := strings.ToLower(err.Error())
		if strings.Contains(s, "unique_credential_name") || (strings.Contains(s, "unique constraint failed") && strings.Contains(s, "credentials")) {
			return apperr.Invalid("The credential has errors.", map[string]string{"name": CredentialNameTaken})
		}
	}
	return err
}

// ReplaceCredential sets the value of the organization's credential c.ID to c.Value (sealed
// again), its last four characters, who and when, with tx, only while it still holds the
// version the caller read (updated_at = was): the guarded change. It reports false when it
// lost (the credential was replaced or deleted meanwhile), changing nothing.
func (db *DB) ReplaceCredential(tx *gorm.DB, c *Credential, was time.Time) (bool, error) {
	sealed, err := db.sealCredential(c.ID, c.Value)
	if err != nil {
		return false, err
	}
	c.Sealed = sealed
	res := tx.Model(&Credential{}).Where("organization_id = ? AND id = ? AND updated_at = ?", c.OrganizationID, c.ID, was).
		Updates(map[string]any{"secret": c.Sealed, "last4": c.Last4, "updated_by": c.UpdatedBy, "updated_at": c.UpdatedAt})
	if res.Error != nil {
		return false, res.Error
	}
	return res.RowsAffected == 1, nil
}

// DeleteCredential deletes the organization's credential id with tx, or ENOTFOUND.
func (db *DB) DeleteCredential(tx *gorm.DB, orgID, id string) error {
	res := tx.Where("organization_id = ? AND id = ?", orgID, id).Delete(&Credential{})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return apperr.NotFound("credential")
	}
	return nil
}
