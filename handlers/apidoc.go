package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"lifeline/handlers/openapi"
)

// apiDocument serves the API's OpenAPI document (handlers/openapi/openapi.yaml) as JSON.
//
// It is public, outside the API's token check: the document describes routes, parameters
// and shapes, none of an organization's data, and integrators and their tools (client
// generators, API consoles) read it before they have a token, as with most services' API
// docs. Every route it describes still needs its token.
func apiDocument() echo.HandlerFunc {
	doc, err := openapi.JSON()
	return func(c echo.Context) error {
		if err != nil {
			return err
		}
		c.Response().Header().Set("Cache-Control", "public, max-age=300")
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, doc)
	}
}
