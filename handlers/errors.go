package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"lifeline/models/apperr"
	"lifeline/views/pages"
)

// apiError is the JSON error body of the API.
type apiError struct {
	Error apiErrorBody `json:"error"`
}

type apiErrorBody struct {
	Code    string            `json:"code"`
	Message string            `json:"message"`
	Fields  map[string]string `json:"fields,omitempty"`
}

// statusOf maps an error to its HTTP status, code and user-safe message. Internal errors
// get a generic message; their cause is logged once, here.
func (s *Server) statusOf(c echo.Context, err error) (int, apiErrorBody) {
	var me *apperr.Error
	var he *echo.HTTPError
	switch {
	case errors.As(err, &me):
		status := map[string]int{apperr.EINVALID: http.StatusUnprocessableEntity, apperr.ENOTFOUND: http.StatusNotFound,
			apperr.EUNAUTHORIZED: http.StatusUnauthorized, apperr.EFORBIDDEN: http.StatusForbidden, apperr.ECONFLICT: http.StatusConflict,
			apperr.EPERIODCLOSED: http.StatusConflict}[me.Code]
		if status == 0 {
			status = http.StatusInternalServerError
		}
		return status, apiErrorBody{Code: me.Code, Message: me.Message, Fields: me.Fields}
	case errors.As(err, &he):
		msg := http.StatusText(he.Code)
		if m, ok := he.Message.(string); ok && he.Code < 500 {
			msg = m
		}
		// Echo's own errors (an unknown URL, a method the route does not take) say only the
		// status's English name: say it in the request's language.
		if id := fmt.Sprintf("http.status.%d", he.Code); msg == http.StatusText(he.Code) && localizer(c).T(id) != id {
			msg = id
		}
		// The CSRF check answers 403 (token missing or not the session's, or a cross-site
		// request): one explanation for the user.
		if (he.Code == http.StatusBadRequest || he.Code == http.StatusForbidden) && strings.Contains(strings.ToLower(msg), "csrf") {
			return http.StatusForbidden, apiErrorBody{Code: "csrf", Message: "http.csrf"}
		}
		if he.Code == http.StatusRequestEntityTooLarge {
			msg = localizer(c).T("http.toolarge", "KiB", MaxBody>>10)
		}
		return he.Code, apiErrorBody{Code: strings.ToLower(strings.ReplaceAll(http.StatusText(he.Code), " ", "_")), Message: msg}
	}
	s.Log.Error("request failed", "method", c.Request().Method, "path", logPath(c.Request().URL.Path), "err", err)
	return http.StatusInternalServerError, apiErrorBody{Code: apperr.EINTERNAL, Message: "http.internal"}
}

// handleError is the one HTTPErrorHandler: JSON for the API and webhooks, a short text for
// htmx requests (shown as a toast), a full page otherwise.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, body := s.statusOf(c, err)
	// Messages that are message ids are said in the request's language; a service's own
	// text stays as it is.
	l := localizer(c)
	body.Message, body.Fields = translated(l, body.Message, body.Fields)
	if len(body.Fields) == 0 {
		body.Fields = nil
	}
	p := c.Request().URL.Path
	switch {
	case strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/hooks/") || p == "/healthz" || p == "/readyz":
		_ = c.JSON(status, apiError{Error: body})
	case c.Request().Header.Get("HX-Request") == "true":
		_ = c.String(status, body.Message)
	case status == http.StatusUnauthorized:
		_ = c.Redirect(http.StatusSeeOther, s.url("login")+"?next="+urlQueryEscape(c.Request().URL.RequestURI()))
	default:
		title := l.TOr(fmt.Sprintf("error.title.%d", status), l.T(genericTitle(status)))
		_ = render(c, status, pages.Error(s.page(c, title, ""), pages.ErrorVM{Status: status, Title: title, Message: body.Message, Fields: body.Fields, BackURL: s.url("workflows")}))
	}
}

// genericTitle is the message id of the title of an error page whose status has none of its
// own.
func genericTitle(status int) string {
	if status >= 500 {
		return "error.title.500"
	}
	return "error.title"
}
