// Package workflows creates and versions workflow definitions. Saving a definition also
// stores its retry policies (workflow level and per step) in retry_policies, where the
// engine resolves them, all in one transaction.
package workflows

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/definition"
	"lifeline/services/notify"
	"lifeline/services/retry"
	"lifeline/services/steps"
)

// Service manages workflows.
type Service struct {
	DB    *models.DB
	Steps *steps.Registry
	// Checks are further rules a definition must pass when saved (e.g. its notification
	// settings, validated by services/notify with the outbound allow list).
	Checks []definition.Check
}

// Create validates raw and stores it as version 1. Errors: EINVALID with field messages.
func (s *Service) Create(ctx context.Context, orgID string, actor audit.Actor, raw []byte) (*models.Workflow, error) {
	def, err := definition.Parse(raw, s.Steps, s.Checks...)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	wf := models.Workflow{
		ID: models.NewID(), OrganizationID: orgID, Name: def.Name, Description: def.Description, Version: 1,
		Definition: models.JSON(def.JSON()), UnknownErrors: unknownSetting(def), WebhookToken: randomHex(20),
		WebhookSecret: NewWebhookSecret(), CreatedAt: now, UpdatedAt: now,
	}
	stored := wf
	if stored.Definition, err = s.DB.Seal(wf.Definition, models.WorkflowAAD(wf.ID)); err != nil {
		return nil, err
	}
	err = s.DB.Tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Create(&stored).Error; err != nil {
			return err
		}
		if err := s.saveVersion(tx, &wf, now); err != nil {
			return err
		}
		if err := savePolicies(tx, &wf, def, now); err != nil {
			return err
		}
		return audit.Record(tx, audit.Entry{OrganizationID: orgID, Actor: actor, Action: "workflow.created", EntityType: "workflow",
			EntityID: wf.ID, At: now, Details: map[string]any{"name": wf.Name, "version": 1}})
	})
	if err != nil {
		return nil, err
	}
	return &wf, nil
}

// Update stores raw as the next version. Running executions keep their version.
//
// Webhook URLs are shown masked (see MaskWebhooks): one sent back as it was shown keeps the
// stored URL.
func (s *Service) Update(ctx context.Context, orgID, id string, actor audit.Actor, raw []byte) (*models.Workflow, error) {
	return s.update(ctx, orgID, id, actor, raw, 0, nil)
}

// update stores raw as the next version of workflow id: only while its version is still
// version (0: any; else ECONFLICT workflow.conflict.version), audited as workflow.updated
// with details added to the entry's.
func (s *Service) update(ctx context.Context, orgID, id string, actor audit.Actor, raw []byte, version int, details map[string]any) (*models.Workflow, error) {
	if strings.Contains(string(raw), models.MaskedWebhookMark) {
		if cur, err := s.DB.GetWorkflow(ctx, orgID, id); err == nil {
			raw = restoreWebhooks(raw, cur.Definition)
		}
	}
	def, err := definition.Parse(raw, s.Steps, s.Checks...)
	if err != nil {
		return nil, err
	}
	var wf models.Workflow
	err = s.DB.Tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Where("organization_id = ? AND id = ?", orgID, id).First(&wf).Error; err != nil {
			if models.IsNotFound(err) {
				return apperr.NotFound("workflow")
			}
			return err
		}
		if version != 0 && wf.Version != version {
			return &apperr.Error{Code: apperr.ECONFLICT, Message: "workflow.conflict.version"}
		}
		now := time.Now().UTC()
		wf.Version++
		wf.Name, wf.Description, wf.Definition, wf.UnknownErrors, wf.UpdatedAt = def.Name, def.Description, models.JSON(def.JSON()), unknownSetting(def), now
		stored := wf
		var err error
		if stored.Definition, err = s.DB.Seal(wf.Definition, models.WorkflowAAD(wf.ID)); err != nil {
			return err
		}
		if err := tx.Save(&stored).Error; err != nil {
			return err
		}
		if err := s.saveVersion(tx, &wf, now); err != nil {
			return err
		}
		if err := savePolicies(tx, &wf, def, now); err != nil {
			return err
		}
		entry := map[string]any{"name": wf.Name, "version": wf.Version}
		for k, v := range details {
			entry[k] = v
		}
		return audit.Record(tx, audit.Entry{OrganizationID: orgID, Actor: actor, Action: "workflow.updated", EntityType: "workflow",
			EntityID: wf.ID, At: now, Details: entry})
	})
	if err != nil {
		return nil, err
	}
	return &wf, nil
}

// SetMovesMoney marks workflow id as moving money or not (settings.movesMoney: an
// accountant's edited input then waits for an admin's approval) as its next version,
// audited (workflow.updated with {"movesMoney": {"from", "to"}}). It changes the version it
// read (a save in between is ECONFLICT); when the setting is already v it stores nothing and
// returns the workflow and false. Errors: ENOTFOUND; ECONFLICT.
func (s *Service) SetMovesMoney(ctx context.Context, orgID, id string, actor audit.Actor, v bool) (*models.Workflow, bool, error) {
	cur, err := s.DB.GetWorkflow(ctx, orgID, id)
	if err != nil {
		return nil, false, err
	}
	var doc map[string]any
	if err := json.Unmarshal(cur.Definition, &doc); err != nil {
		return nil, false, err
	}
	settings, _ := doc["settings"].(map[string]any)
	if settings == nil {
		settings = map[string]any{}
	}
	was := settings["movesMoney"] == true
	if was == v {
		return cur, false, nil
	}
	if v {
		settings["movesMoney"] = true
	} else {
		delete(settings, "movesMoney")
	}
	doc["settings"] = settings
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, false, err
	}
	wf, err := s.update(ctx, orgID, id, actor, raw, cur.Version, map[string]any{"movesMoney": map[string]bool{"from": was, "to": v}})
	if err != nil {
		return nil, false, err
	}
	return wf, true, nil
}

func unknownSetting(def *definition.Definition) string {
	if def.UnknownRetry() {
		return definition.UnknownRetry
	}
	return definition.UnknownNoRetry
}

// saveVersion stores wf's definition (plain, sealed here) as its current version.
func (s *Service) saveVersion(tx *gorm.DB, wf *models.Workflow, now time.Time) error {
	def, err := s.DB.Seal(wf.Definition, models.VersionAAD(wf.ID, wf.Version))
	if err != nil {
		return err
	}
	return tx.Create(&models.WorkflowVersion{ID: models.NewID(), OrganizationID: wf.OrganizationID, WorkflowID: wf.ID,
		Version: wf.Version, Definition: def, CreatedAt: now}).Error
}

// savePolicies replaces the workflow's stored policies with the definition's.
func savePolicies(tx *gorm.DB, wf *models.Workflow, def *definition.Definition, now time.Time) error {
	if err := tx.Where("organization_id = ? AND workflow_id = ?", wf.OrganizationID, wf.ID).Delete(&models.RetryPolicy{}).Error; err != nil {
		return err
	}
	if def.Settings.RetryPolicy != nil {
		if err := tx.Create(PolicyRow(wf.OrganizationID, &wf.ID, nil, def.Settings.RetryPolicy, retry.ResolveLevels(def.Settings.RetryPolicy), now)).Error; err != nil {
			return err
		}
	}
	for _, st := range def.Steps {
		if st.RetryPolicy == nil {
			continue
		}
		id := st.ID
		eff := retry.ResolveLevels(def.Settings.RetryPolicy, st.RetryPolicy)
		if err := tx.Create(PolicyRow(wf.OrganizationID, &wf.ID, &id, st.RetryPolicy, eff, now)).Error; err != nil {
			return err
		}
	}
	return nil
}

// PolicyRow builds a retry_policies row: the spec as written and the effective values.
func PolicyRow(orgID string, workflowID, stepID *string, spec *retry.Spec, eff retry.Policy, now time.Time) *models.RetryPolicy {
	b, _ := json.Marshal(spec)
	return &models.RetryPolicy{
		ID: models.NewID(), OrganizationID: orgID, WorkflowID: workflowID, StepID: stepID,
		MaxRetries: eff.MaxRetries, InitialDelayMs: int(eff.InitialDelay.Milliseconds()), MaxDelayMs: int(eff.MaxDelay.Milliseconds()),
		BackoffMultiplier: eff.Multiplier, RetryOnErrors: typeNames(eff.RetryOn), NoRetryOnErrors: typeNames(eff.NoRetryOn),
		Spec: models.JSON(b), CreatedAt: now,
	}
}

func typeNames[T ~string](ts []T) models.StringList {
	out := models.StringList{}
	for _, t := range ts {
		out = append(out, string(t))
	}
	return out
}

// SecretPrefix starts every webhook signing secret in the Standard Webhooks form.
const SecretPrefix = "whsec_"

// NewWebhookSecret returns a new webhook signing secret: "whsec_" and the base64 of 32
// random bytes, the form Standard Webhooks libraries accept.
func NewWebhookSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// SigningSecret returns a stored webhook secret in the Standard Webhooks form, the one
// shown to admins and used to verify signatures. Secrets stored since the move to Standard
// Webhooks already have it. Older secrets (64 hex characters, no prefix) keep working: their
// bytes as written are the HMAC key, so their Standard Webhooks form is "whsec_" and the
// base64 of the stored text. Nothing is rewritten in the database.
func SigningSecret(stored string) string {
	if strings.HasPrefix(stored, SecretPrefix) {
		return stored
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString([]byte(stored))
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// NotificationsCheck validates a definition's settings.errorNotifications with n (which knows
// the outbound allow list its webhook URLs are checked against).
func NotificationsCheck(n interface {
	ParseSettings(raw json.RawMessage) (notify.Settings, map[string]string)
}) definition.Check {
	return func(d *definition.Definition) map[string]string {
		if len(d.Settings.ErrorNotifications) == 0 {
			return nil
		}
		_, errs := n.ParseSettings(d.Settings.ErrorNotifications)
		return errs
	}
}

// webhookKeys are the webhook URLs of settings.errorNotifications.
var webhookKeys = []string{"slackWebhookUrl", "teamsWebhookUrl"}

// errorNotifications returns the settings.errorNotifications object of a decoded definition.
func errorNotifications(def map[string]any) map[string]any {
	settings, _ := def["settings"].(map[string]any)
	en, _ := settings["errorNotifications"].(map[string]any)
	return en
}

// MaskWebhooks returns a definition with the webhook URLs of its notification settings
// masked, as even admins see them (a webhook's URL is its credential); raw when it has none
// or is not an object.
func MaskWebhooks(raw []byte) []byte {
	var def map[string]any
	if json.Unmarshal(raw, &def) != nil {
		return raw
	}
	en := errorNotifications(def)
	changed := false
	for _, k := range webhookKeys {
		if u, ok := en[k].(string); ok && u != "" {
			en[k], changed = models.MaskWebhookURL(u), true
		}
	}
	if !changed {
		return raw
	}
	out, err := json.Marshal(def)
	if err != nil {
		return raw
	}
	return out
}

// restoreWebhooks puts back into raw the stored webhook URLs that come back masked.
func restoreWebhooks(raw, stored []byte) []byte {
	var def, cur map[string]any
	if json.Unmarshal(raw, &def) != nil || json.Unmarshal(stored, &cur) != nil {
		return raw
	}
	en, old := errorNotifications(def), errorNotifications(cur)
	for _, k := range webhookKeys {
		sent, _ := en[k].(string)
		was, _ := old[k].(string)
		if was != "" && sent == models.MaskWebhookURL(was) {
			en[k] = was
		}
	}
	out, err := json.Marshal(def)
	if err != nil {
		return raw
	}
	return out
}
