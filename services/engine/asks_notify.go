package engine

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/services/escalation"
	"lifeline/services/notify"
)

// interventionNotifier is what the notifier does for requests (notify.Service does): a
// notifier without it tells nobody of requests (the requests are made all the same).
type interventionNotifier interface {
	EmitIntervention(tx *gorm.DB, n notify.InterventionNotice) error
}

var _ interventionNotifier = (*notify.Service)(nil)

// noticeAbout is what a request's notification says besides the request itself.
type noticeAbout struct {
	workflow, subject string
	stage             string
	level, round      int
}

// tellHolders tells the request's holders (the members its holders name; admins include
// owners) of it, in tx: a single-use e-mail link per member (stored hashed, expiring with the
// request), and the notification on every channel. A notification that cannot be recorded
// is rolled back alone and logged (as emit does): the request stands.
func (e *core) tellHolders(tx *gorm.DB, iv *models.Intervention, about noticeAbout, now time.Time) error {
	ms, err := models.RoleMembersTx(tx, iv.OrganizationID)
	if err != nil {
		return err
	}
	var people []notify.LinkedPerson
	for _, m := range ms {
		if m.Role == models.RoleViewer || !escalation.Matches(m, iv.Holders) || contains(iv.Barred, m.UserID) {
			continue
		}
		token, err := newLinkToken()
		if err != nil {
			return err
		}
		link := models.InterventionLink{ID: models.NewID(), OrganizationID: iv.OrganizationID, InterventionID: iv.ID, UserID: m.UserID,
			TokenHash: hashToken(token), ExpiresAt: iv.ExpiresAt, CreatedAt: now}
		if err := tx.Create(&link).Error; err != nil {
			return err
		}
		people = append(people, notify.LinkedPerson{UserID: m.UserID, Email: m.Email, Token: token})
	}
	n, ok := e.notifier.(interventionNotifier)
	if e.notifier == nil || !ok || len(people) == 0 {
		return nil
	}
	if err := tx.SavePoint("intervention").Error; err != nil {
		return err
	}
	err = n.EmitIntervention(tx, notify.InterventionNotice{OrganizationID: iv.OrganizationID, InterventionID: iv.ID, ExecutionID: iv.ExecutionID,
		Stage: about.stage, Level: about.level, Round: about.round, Kind: iv.Kind, Title: iv.Title, Message: iv.Message, StepName: iv.StepName,
		WorkflowName: about.workflow, Subject: about.subject, ExpiresAt: iv.ExpiresAt, At: now, People: people})
	if err == nil {
		return nil
	}
	if rerr := tx.RollbackTo("intervention").Error; rerr != nil {
		return rerr
	}
	e.log.Warn("a request could not be notified; it stands without the notification", "intervention_id", iv.ID, "stage", about.stage, "err", err)
	return nil
}

// newLinkToken is a random 256-bit token, URL-safe.
func newLinkToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// hashToken is what intervention_links stores of a token: its SHA-256, hex.
func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
