package handlers

import (
	"encoding/json"

	"lifeline/models"
	"lifeline/services/auth"
)

// definitionFor returns a workflow definition as p may see it: whole for admins; for
// everyone else with the values under secret-looking keys (headers such as Authorization,
// body fields, at any depth) and secret query parameters inside URLs masked.
func (s *Server) definitionFor(p *auth.Principal, raw []byte) json.RawMessage {
	if p.Can(models.RoleAdmin) {
		return raw
	}
	return s.Engine.Redactor().JSON(raw)
}
