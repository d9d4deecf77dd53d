package engine

import (
	"context"
	"fmt"

	"lifeline/models"
)

// Reseal does what Engine.Reseal says.
func (e *maintenance) Reseal(ctx context.Context) (int, error) {
	if e.cfg.Sealer == nil {
		return 0, fmt.Errorf("reseal: no encryption keys configured")
	}
	n, err := e.db.ResealColumns(ctx, e.cfg.Sealer, []models.SealedColumn{
		{Table: tableExecutions, Column: "input", AAD: func(id string) string { return aad(tableExecutions, id, "input") }},
		{Table: tableExecutions, Column: "original_input", AAD: func(id string) string { return aad(tableExecutions, id, "original_input") }},
		{Table: tableAttempts, Column: "input", AAD: func(id string) string { return aad(tableAttempts, id, "input") }},
		{Table: tableAttempts, Column: "output", AAD: func(id string) string { return aad(tableAttempts, id, "output") }},
		{Table: tableCompensations, Column: "compensation_config", AAD: func(id string) string { return aad(tableCompensations, id, "compensation_config") }, SealClear: true},
		{Table: "db_connections", Column: "dsn", AAD: models.DBConnectionAAD},
		{Table: "notification_deliveries", Column: "target", AAD: models.NotificationDeliveryAAD},
		{Table: "notification_settings", Key: "organization_id", Column: "slack_webhook_url",
			AAD: func(org string) string { return models.NotificationSettingsAAD(org, "slack_webhook_url") }},
		{Table: "notification_settings", Key: "organization_id", Column: "teams_webhook_url",
			AAD: func(org string) string { return models.NotificationSettingsAAD(org, "teams_webhook_url") }},
	})
	if err != nil {
		return n, err
	}
	m, err := e.db.ResealDefinitions(ctx)
	return n + m, err
}
