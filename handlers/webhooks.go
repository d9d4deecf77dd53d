package handlers

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/services/audit"
	"lifeline/services/engine"
)

// webhook starts an execution from a signed inbound webhook: the body is the input, signed
// with HMAC-SHA256 under the workflow's secret in X-Lifeline-Signature: sha256=<hex>.
func (s *Server) webhook(c echo.Context) error {
	ctx := c.Request().Context()
	body, err := readBody(c)
	if err != nil {
		return err
	}
	wf, err := s.DB.WorkflowByWebhookToken(ctx, c.Param("token"))
	if err != nil {
		return err
	}
	if !validSignature(wf.WebhookSecret, body, c.Request().Header.Get("X-Lifeline-Signature")) {
		return models.Errorf(models.EUNAUTHORIZED, "Missing or invalid X-Lifeline-Signature (expected sha256=<hex HMAC-SHA256 of the body>).")
	}
	ex, replayed, err := s.Engine.Start(ctx, engine.StartRequest{OrganizationID: wf.OrganizationID, WorkflowID: wf.ID, Input: body,
		Trigger: engine.TriggerWebhook, Actor: audit.Actor{Type: audit.ActorSystem}, IdempotencyKey: c.Request().Header.Get("Idempotency-Key")})
	if err != nil {
		return err
	}
	status := http.StatusAccepted
	if replayed {
		status = http.StatusOK
	}
	return c.JSON(status, map[string]any{"executionId": ex.ID, "status": ex.Status})
}

// Sign returns the X-Lifeline-Signature value for body.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func validSignature(secret string, body []byte, header string) bool {
	got, ok := strings.CutPrefix(strings.TrimSpace(header), "sha256=")
	if !ok {
		return false
	}
	gotB, err := hex.DecodeString(got)
	if err != nil {
		return false
	}
	want, _ := hex.DecodeString(strings.TrimPrefix(Sign(secret, body), "sha256="))
	return hmac.Equal(gotB, want)
}
