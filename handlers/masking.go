package handlers

import (
	"encoding/json"

	"lifeline/models"
	"lifeline/services/auth"
	"lifeline/services/workflows"
)

// definitionFor returns a workflow definition as p may see it: whole for admins; for
// everyone else with the values under secret-looking keys (headers such as Authorization,
// body fields, at any depth) and secret query parameters inside URLs masked.
func (s *Server) definitionFor(p *auth.Principal, raw []byte) json.RawMessage {
	if p.Can(models.RoleAdmin) {
		// Webhook URLs masked even so; sent back masked, they keep the stored ones.
		return workflows.MaskWebhooks(raw)
	}
	return s.Engine.Redactor().JSON(raw)
}
