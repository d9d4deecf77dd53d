package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/engine"
	"lifeline/services/workflows"
)

// The Standard Webhooks headers of an inbound webhook.
const (
	HeaderWebhookID        = standardwebhooks.HeaderWebhookID
	HeaderWebhookTimestamp = standardwebhooks.HeaderWebhookTimestamp
	HeaderWebhookSignature = standardwebhooks.HeaderWebhookSignature
)

// maxWebhookID bounds the webhook-id header (it becomes part of an idempotency key).
const maxWebhookID = 200

// webhookKeyPrefix namespaces a delivery's webhook-id among the workflow's idempotency
// keys; API clients may not use keys with this prefix (see WorkflowsHandler.APIStart).
const webhookKeyPrefix = "webhook:"

// webhookWorkflows finds the workflow an inbound webhook's token belongs to
// (workflows.Service).
type webhookWorkflows interface {
	ByWebhookToken(ctx context.Context, token string) (*models.Workflow, error)
}

var _ webhookWorkflows = (*workflows.Service)(nil)

// WebhookHandler serves inbound webhooks (POST /hooks/{token}).
type WebhookHandler struct {
	wfs webhookWorkflows
	eng starter
}

// newWebhookHandler returns the handler.
func newWebhookHandler(wfs webhookWorkflows, eng starter) *WebhookHandler {
	return &WebhookHandler{wfs: wfs, eng: eng}
}

// Receive starts an execution from an inbound webhook signed the Standard Webhooks way
// (https://www.standardwebhooks.com): the body is the input; the headers are webhook-id,
// webhook-timestamp (Unix seconds) and webhook-signature ("v1,<base64 HMAC-SHA256 of
// id.timestamp.body>" under the workflow's whsec_ secret, see workflows.SigningSecret).
//
// Answers: 202 and the new execution; 200 and the same execution when the webhook-id was
// delivered before (with an equal body) within the last 24 h, nothing new started; 401 for a
// missing or wrong signature or a timestamp more than 5 minutes from the server's clock; 409
// when the webhook-id was delivered before with a different body; 404 for an unknown token.
//
// Replay protection: the webhook-id is the execution's idempotency key ("webhook:<id>"),
// so the execution and the record of the delivery are written in one transaction and kept
// for the engine's idempotency TTL (24 h). A captured request cannot be replayed later than
// that either: its timestamp is then far outside the 5-minute tolerance.
func (h *WebhookHandler) Receive(c echo.Context) error {
	ctx := c.Request().Context()
	token := c.Param("token")
	if !validWebhookToken(token) {
		return apperr.NotFound("webhook")
	}
	body, err := readBody(c)
	if err != nil {
		return err
	}
	wf, err := h.wfs.ByWebhookToken(ctx, token)
	if err != nil {
		return err
	}
	wh, err := standardwebhooks.NewWebhook(workflows.SigningSecret(wf.WebhookSecret))
	if err != nil {
		return fmt.Errorf("webhook secret of workflow %s: %w", wf.ID, err)
	}
	hdr := c.Request().Header
	if err := wh.Verify(body, hdr); err != nil {
		return webhookAuthError(err)
	}
	id := hdr.Get(HeaderWebhookID)
	if len(id) > maxWebhookID || !printableASCII(id) {
		return apperr.Invalid("The webhook-id header is not usable.",
			map[string]string{HeaderWebhookID: fmt.Sprintf("must be 1-%d printable ASCII characters", maxWebhookID)})
	}
	ex, replayed, err := h.eng.Start(ctx, engine.StartRequest{OrganizationID: wf.OrganizationID, WorkflowID: wf.ID, Input: body,
		Trigger: engine.TriggerWebhook, Actor: audit.Actor{Type: audit.ActorSystem}, IdempotencyKey: webhookKeyPrefix + id})
	var me *apperr.Error
	if errors.As(err, &me) && me.Code == apperr.EINVALID && me.Fields["Idempotency-Key"] != "" {
		// The engine refuses a reused key with a different request: here, the same
		// webhook-id with another body.
		return apperr.Errorf(apperr.ECONFLICT, "This webhook-id (%q) was already delivered with a different body; a new event needs a new webhook-id.", id)
	}
	if err != nil {
		return err
	}
	status := http.StatusAccepted
	if replayed {
		status = http.StatusOK
	}
	return c.JSON(status, map[string]any{"executionId": ex.ID, "status": ex.Status, "replayed": replayed})
}

// webhookAuthError turns a Standard Webhooks verification failure into a 401 saying what
// is wrong.
func webhookAuthError(err error) error {
	switch {
	case errors.Is(err, standardwebhooks.ErrRequiredHeaders):
		return apperr.Errorf(apperr.EUNAUTHORIZED, "Missing webhook-id, webhook-timestamp or webhook-signature header (Standard Webhooks signing is required).")
	case errors.Is(err, standardwebhooks.ErrMessageTooOld), errors.Is(err, standardwebhooks.ErrMessageTooNew):
		return apperr.Errorf(apperr.EUNAUTHORIZED, "The webhook-timestamp is more than 5 minutes away from the server's clock (server time: %d); sign every delivery with the current Unix time.", time.Now().Unix())
	case errors.Is(err, standardwebhooks.ErrInvalidHeaders):
		return apperr.Errorf(apperr.EUNAUTHORIZED, "The webhook-timestamp must be the Unix time in seconds.")
	}
	return apperr.Errorf(apperr.EUNAUTHORIZED, "The webhook-signature does not match (expected v1,<base64 HMAC-SHA256 of \"webhook-id.webhook-timestamp.body\"> under the workflow's whsec_ secret).")
}

// Sign returns the Standard Webhooks headers (webhook-id, webhook-timestamp,
// webhook-signature) for delivering body with id at the given time, signed with a workflow's
// secret (stored or whsec_ form).
func Sign(secret, id string, at time.Time, body []byte) (http.Header, error) {
	wh, err := standardwebhooks.NewWebhook(workflows.SigningSecret(secret))
	if err != nil {
		return nil, err
	}
	sig, err := wh.Sign(id, at, body)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set(HeaderWebhookID, id)
	h.Set(HeaderWebhookTimestamp, strconv.FormatInt(at.Unix(), 10))
	h.Set(HeaderWebhookSignature, sig)
	return h, nil
}

// validWebhookToken reports whether token can be a webhook token (lowercase hex, as
// workflows creates them), so junk never reaches the database.
func validWebhookToken(token string) bool {
	if token == "" || len(token) > 64 {
		return false
	}
	for i := 0; i < len(token); i++ {
		c := token[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return s != ""
}
