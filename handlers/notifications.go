package handlers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/notify"
)

// notificationService is what the notifications API needs.
type notificationService interface {
	OrgSettings(ctx context.Context, orgID string) (notify.Settings, error)
	SaveOrgSettings(ctx context.Context, orgID string, actor audit.Actor, raw json.RawMessage) (notify.Settings, error)
	Test(ctx context.Context, orgID, userID string, ch notify.Channel) error
	Deliveries(ctx context.Context, orgID, executionID string, limit int) ([]notify.Delivery, error)
	Resend(ctx context.Context, orgID, id string, actor audit.Actor) error
	Inbox(ctx context.Context, orgID, userID string, limit int) ([]notify.InApp, int64, error)
	MarkRead(ctx context.Context, orgID, userID, id string) error
	MarkAllRead(ctx context.Context, orgID, userID string) (int64, error)
}

var _ notificationService = (*notify.Service)(nil)

// NotificationsHandler serves the notification settings (admins), the delivery log
// (admins) with resend and test messages, and the caller's in-app notifications. Webhook
// URLs are only ever returned masked; another organization's ids are 404.
type NotificationsHandler struct {
	*chrome
	ns notificationService
}

// newNotificationsHandler returns the handler.
func newNotificationsHandler(ch *chrome, ns notificationService) *NotificationsHandler {
	return &NotificationsHandler{chrome: ch, ns: ns}
}

// APISettings: GET /api/v1/notifications/settings → the organization's defaults, webhook
// URLs masked.
func (h *NotificationsHandler) APISettings(c echo.Context) error {
	st, err := h.ns.OrgSettings(c.Request().Context(), principal(c).OrganizationID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st.Masked())
}

// APISaveSettings: PUT /api/v1/notifications/settings with the settings (seed 000's keys,
// notifyOnBreakerOpen, digestThresholdPerMinute; a masked webhook URL keeps the stored one)
// → 200 with them masked; 422 with field messages. PUT replaces: a key left out takes its
// default (so {} is a deliberate reset), while a body that is not one JSON object (empty,
// null, an array…) is 422 and changes nothing.
func (h *NotificationsHandler) APISaveSettings(c echo.Context) error {
	body, err := readObject(c)
	if err != nil {
		return err
	}
	p := principal(c)
	st, err := h.ns.SaveOrgSettings(c.Request().Context(), p.OrganizationID, actorOf(p), body)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st.Masked())
}

// APITest: POST /api/v1/notifications/test with {"channel"} → 200 {"ok": true} when the
// test message was delivered, {"ok": false, "error"} with the exact error when not.
func (h *NotificationsHandler) APITest(c echo.Context) error {
	var in struct {
		Channel string `json:"channel"`
	}
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	p := principal(c)
	err := h.ns.Test(c.Request().Context(), p.OrganizationID, p.UserID, notify.Channel(in.Channel))
	switch {
	case err == nil:
		return c.JSON(http.StatusOK, map[string]any{"ok": true, "channel": in.Channel, "error": nil})
	case errors.Is(err, notify.ErrTestFailed):
		return c.JSON(http.StatusOK, map[string]any{"ok": false, "channel": in.Channel, "error": err.Error()})
	}
	return err
}

// APIDeliveries: GET /api/v1/notifications/deliveries?executionId= → {"items": [{"id",
// "channel", "recipient", "event", "status", "attempts", "lastError", …}]}, newest first.
func (h *NotificationsHandler) APIDeliveries(c echo.Context) error {
	q := newListQuery(c)
	exec := q.id("executionId", "notifications.err.executionid")
	limit := cmp.Or(q.limit(), 100)
	if err := q.err(); err != nil {
		return err
	}
	items, err := h.ns.Deliveries(c.Request().Context(), principal(c).OrganizationID, exec, limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items})
}

// APIResend: POST /api/v1/notifications/deliveries/{id}/resend → 202; 409 while it is
// pending or being sent.
func (h *NotificationsHandler) APIResend(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "delivery"); err != nil {
		return err
	}
	p := principal(c)
	if err := h.ns.Resend(c.Request().Context(), p.OrganizationID, id, actorOf(p)); err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]any{"id": id, "status": models.DeliveryPending})
}

// APIInbox: GET /api/v1/notifications → the caller's in-app notifications {"items",
// "unread"} (an API token has none).
func (h *NotificationsHandler) APIInbox(c echo.Context) error {
	p, q := principal(c), newListQuery(c)
	limit := cmp.Or(q.limit(), 50)
	if err := q.err(); err != nil {
		return err
	}
	if p.UserID == "" {
		return c.JSON(http.StatusOK, map[string]any{"items": []notify.InApp{}, "unread": 0})
	}
	items, unread, err := h.ns.Inbox(c.Request().Context(), p.OrganizationID, p.UserID, limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items, "unread": unread})
}

// APIRead: POST /api/v1/notifications/{id}/read → 204; 404 for another user's.
func (h *NotificationsHandler) APIRead(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "notification"); err != nil {
		return err
	}
	p := principal(c)
	if p.UserID == "" {
		return apperr.NotFound("notification")
	}
	if err := h.ns.MarkRead(c.Request().Context(), p.OrganizationID, p.UserID, id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// APIReadAll: POST /api/v1/notifications/read-all → 200 {"marked"}.
func (h *NotificationsHandler) APIReadAll(c echo.Context) error {
	p := principal(c)
	var n int64
	if p.UserID != "" {
		var err error
		if n, err = h.ns.MarkAllRead(c.Request().Context(), p.OrganizationID, p.UserID); err != nil {
			return err
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"marked": n})
}
