package models

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"lifeline/models/apperr"
	"strings"
	"time"

	"gorm.io/gorm"
)

// DBConnection is a database connection an admin configured by name (db_connections): the
// database_operation compensation runs its statements through one. The DSN is kept sealed at
// rest; the queries here fill DSN in clear from SealedDSN, and only services/dbconn reads it.
type DBConnection struct {
	ID             string
	OrganizationID string
	Name           string
	Driver         string
	// SealedDSN is the stored column: the JSON document {"password": DSN} whose value the
	// Sealer replaced by an envelope bound to the row (DBConnectionAAD).
	SealedDSN JSON `gorm:"column:dsn"`
	// DSN is the connection string in clear. It is never stored as it is.
	DSN         string `gorm:"-"`
	Description string
	// KeyTable is the table in the connection's database where a database_operation
	// compensation records its idempotency key ("lifeline_compensation_keys", or
	// "schema.table"); "" stands for the default.
	KeyTable string
	// CreatedBy is the user or API token that created the connection (nil: the system).
	CreatedBy     *string
	CreatedAt     time.Time
	UpdatedAt     time.Time
	LastTestedAt  *time.Time
	LastTestError *string // nil: the last test succeeded (or there was none)
}

func (DBConnection) TableName() string { return "db_connections" }

// DBConnectionAAD identifies the dsn column of a db_connections row.
func DBConnectionAAD(id string) string { return "db_connections:" + id + ":dsn" }

// dsnKey is the key of the sealed document. The Sealer seals the values under secret-looking
// keys (LIFELINE_REDACT_KEYS), and "password" is one of them unless configured away; then
// sealDSN refuses to store the DSN rather than keep it in clear.
const dsnKey = "password"

// ErrDSNNotSealed is returned when a Sealer is set but left the DSN in clear: the configured
// secret keys (LIFELINE_REDACT_KEYS) do not match "password".
var ErrDSNNotSealed = errors.New("the DSN was not encrypted: LIFELINE_REDACT_KEYS must match the key \"password\"")

// sealDSN returns the column value of dsn for the row id.
func (db *DB) sealDSN(id, dsn string) (JSON, error) {
	raw, err := json.Marshal(map[string]string{dsnKey: dsn})
	if err != nil {
		return nil, err
	}
	sealed, err := db.Seal(raw, DBConnectionAAD(id))
	if err != nil {
		return nil, err
	}
	if db.Sealer != nil && !bytes.Contains(sealed, []byte(`"enc:`)) {
		return nil, ErrDSNNotSealed
	}
	return sealed, nil
}

// openDSN fills c.DSN from c.SealedDSN.
func (db *DB) openDSN(c *DBConnection) error {
	plain, err := db.Open(c.SealedDSN, DBConnectionAAD(c.ID))
	if err != nil {
		return err
	}
	var doc map[string]string
	if err := json.Unmarshal(plain, &doc); err != nil {
		return fmt.Errorf("database connection %s: the stored DSN is not readable: %w", c.ID, err)
	}
	c.DSN = doc[dsnKey]
	return nil
}

// DBConnections returns the organization's database connections by name, DSNs in clear.
func (db *DB) DBConnections(ctx context.Context, orgID string) ([]DBConnection, error) {
	var out []DBConnection
	if err := db.Conn(ctx).Where("organization_id = ?", orgID).Order("name").Find(&out).Error; err != nil {
		return nil, err
	}
	for i := range out {
		if err := db.openDSN(&out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// GetDBConnection returns the organization's connection id (a UUID), or ENOTFOUND.
func (db *DB) GetDBConnection(ctx context.Context, orgID, id string) (*DBConnection, error) {
	return db.getDBConnection(db.Conn(ctx).Where("organization_id = ? AND id = ?", orgID, id))
}

// DBConnectionByName returns the organization's connection named name, or ENOTFOUND.
func (db *DB) DBConnectionByName(ctx context.Context, orgID, name string) (*DBConnection, error) {
	return db.getDBConnection(db.Conn(ctx).Where("organization_id = ? AND name = ?", orgID, name))
}

func (db *DB) getDBConnection(q *gorm.DB) (*DBConnection, error) {
	var c DBConnection
	if err := q.First(&c).Error; err != nil {
		if IsNotFound(err) {
			return nil, apperr.NotFound("database connection")
		}
		return nil, err
	}
	return &c, db.openDSN(&c)
}

// DBConnectionNameTaken is the field message of a name another connection of the
// organization has.
const DBConnectionNameTaken = "is already used by another connection"

// CreateDBConnection inserts c with tx, its DSN sealed. A name the organization already
// uses is apperr.EINVALID on "name".
func (db *DB) CreateDBConnection(tx *gorm.DB, c *DBConnection) error {
	sealed, err := db.sealDSN(c.ID, c.DSN)
	if err != nil {
		return err
	}
	c.SealedDSN = sealed
	return nameTaken(tx.Create(c).Error)
}

// UpdateDBConnection writes every column of c with tx (the DSN sealed again), or apperr.ENOTFOUND
// when the organization has no such connection.
func (db *DB) UpdateDBConnection(tx *gorm.DB, c *DBConnection) error {
	sealed, err := db.sealDSN(c.ID, c.DSN)
	if err != nil {
		return err
	}
	c.SealedDSN = sealed
	res := tx.Model(&DBConnection{}).Where("organization_id = ? AND id = ?", c.OrganizationID, c.ID).Updates(map[string]any{
		"name": c.Name, "driver": c.Driver, "dsn": c.SealedDSN, "description": c.Description, "key_table": c.KeyTable, "updated_at": c.UpdatedAt,
		"last_tested_at": c.LastTestedAt, "last_test_error": c.LastTestError,
	})
	if err := nameTaken(res.Error); err != nil {
		return err
	}
	if res.RowsAffected == 0 {
		return apperr.NotFound("database connection")
	}
	return nil
}

// DeleteDBConnection deletes the organization's connection id with tx, or ENOTFOUND.
func (db *DB) DeleteDBConnection(tx *gorm.DB, orgID, id string) error {
	res := tx.Where("organization_id = ? AND id = ?", orgID, id).Delete(&DBConnection{})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return apperr.NotFound("database connection")
	}
	return nil
}

// RecordDBConnectionTest stores the outcome of a connection test: when, and its error (nil
// for success). A connection deleted meanwhile is ENOTFOUND.
func (db *DB) RecordDBConnectionTest(ctx context.Context, orgID, id string, at time.Time, testErr *string) error {
	res := db.Conn(ctx).Model(&DBConnection{}).Where("organization_id = ? AND id = ?", orgID, id).
		Updates(map[string]any{"last_tested_at": at.UTC(), "last_test_error": testErr})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return apperr.NotFound("database connection")
	}
	return nil
}

// nameTaken turns the violation of unique_db_connection_name into apperr.EINVALID on "name".
func nameTaken(err error) error {
	if err == nil {
		return nil
	}
	s := strings.ToLower(err.Error())
	if strings.Contains(s, "unique_db_connection_name") || (strings.Contains(s, "unique constraint failed") && strings.Contains(s, "db_connections")) {
		return apperr.Invalid("The connection has errors.", map[string]string{"name": DBConnectionNameTaken})
	}
	return err
}
