package auth

import (
	"time"

	"gorm.io/gorm/clause"

	"lifeline/models"
)

// SessionStore keeps scs sessions in the sessions table.
type SessionStore struct{ DB *models.DB }

// Find returns the session data of an unexpired token.
func (s *SessionStore) Find(token string) ([]byte, bool, error) {
	var row models.Session
	err := s.DB.Gorm.Where("token = ? AND expiry > ?", token, time.Now().UTC()).First(&row).Error
	if models.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return row.Data, true, nil
}

// Commit stores or replaces a session.
func (s *SessionStore) Commit(token string, b []byte, expiry time.Time) error {
	return s.DB.Gorm.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "token"}},
		DoUpdates: clause.AssignmentColumns([]string{"data", "expiry"})}).
		Create(&models.Session{Token: token, Data: b, Expiry: expiry.UTC()}).Error
}

// Delete removes a session.
func (s *SessionStore) Delete(token string) error {
	return s.DB.Gorm.Where("token = ?", token).Delete(&models.Session{}).Error
}

// DeleteExpired removes expired sessions.
func (s *SessionStore) DeleteExpired() error {
	return s.DB.Gorm.Where("expiry < ?", time.Now().UTC()).Delete(&models.Session{}).Error
}
