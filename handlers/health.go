package handlers

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"lifeline/services/engine"
)

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(c echo.Context) error {
	if s.Ready != nil {
		if err := s.Ready(c.Request().Context()); err != nil {
			// The reason is for the operator's log, not for whoever asks. An unreachable
			// database was logged once already, when it was found.
			if !errors.Is(err, engine.ErrUnreachable) {
				s.Log.Warn("not ready", "err", err)
			}
			return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
		}
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}
