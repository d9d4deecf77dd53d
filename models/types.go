package models

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// JSON is a JSON document stored in a JSONB column (PostgreSQL) or a TEXT column (SQLite).
// An empty JSON is stored as NULL.
type JSON json.RawMessage

// Value implements driver.Valuer.
func (j JSON) Value() (driver.Value, error) {
	if len(j) == 0 {
		return nil, nil
	}
	return string(j), nil
}

// Scan implements sql.Scanner.
func (j *JSON) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*j = nil
	case []byte:
		*j = append(JSON(nil), v...)
	case string:
		*j = JSON(v)
	default:
		return fmt.Errorf("models.JSON: cannot scan %T", src)
	}
	return nil
}

// MarshalJSON keeps the document as it is; an empty JSON marshals as null.
func (j JSON) MarshalJSON() ([]byte, error) {
	if len(j) == 0 {
		return []byte("null"), nil
	}
	return []byte(j), nil
}

// UnmarshalJSON stores a copy of data.
func (j *JSON) UnmarshalJSON(data []byte) error {
	*j = append(JSON(nil), data...)
	return nil
}

// MustJSON marshals v, for values that cannot fail to marshal (maps of decoded JSON).
func MustJSON(v any) JSON {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("models.MustJSON: %v", err))
	}
	return JSON(b)
}

// StringList is a TEXT[] column on PostgreSQL and a JSON array in a TEXT column on SQLite.
type StringList []string

// GormValue writes the dialect's form.
func (l StringList) GormValue(_ context.Context, db *gorm.DB) clause.Expr {
	if db.Dialector.Name() == "postgres" {
		parts := make([]string, len(l))
		for i, s := range l {
			parts[i] = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
		}
		return clause.Expr{SQL: "?::text[]", Vars: []any{"{" + strings.Join(parts, ",") + "}"}}
	}
	b, _ := json.Marshal([]string(l))
	return clause.Expr{SQL: "?", Vars: []any{string(b)}}
}

// Scan reads either form.
func (l *StringList) Scan(src any) error {
	var s string
	switch v := src.(type) {
	case nil:
		*l = nil
		return nil
	case []byte:
		s = string(v)
	case string:
		s = v
	default:
		return fmt.Errorf("models.StringList: cannot scan %T", src)
	}
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "[") {
		return json.Unmarshal([]byte(s), (*[]string)(l))
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}")
	out := []string{}
	if s != "" {
		for _, p := range strings.Split(s, ",") {
			out = append(out, strings.Trim(strings.TrimSpace(p), `"`))
		}
	}
	*l = out
	return nil
}

// GormDataType tells GORM's schema parser what the field is.
func (StringList) GormDataType() string { return "text" }

// Value is the SQLite form; GormValue takes precedence when GORM writes.
func (l StringList) Value() (driver.Value, error) {
	b, err := json.Marshal([]string(l))
	return string(b), err
}
