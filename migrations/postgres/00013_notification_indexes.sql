-- +goose Up
-- Notification indexes (a review of issue 11): the digest count of Emit, inside the engine's
-- transaction, reads one workflow's deliveries of one minute (the old index led with the
-- channel and recipient after the workflow, so it read the workflow's whole history); the
-- retention's NOT EXISTS and the events' ON DELETE CASCADE look deliveries up by event; the
-- delivery log pages an organization's deliveries newest first.
CREATE INDEX idx_notification_deliveries_minute ON notification_deliveries(workflow_id, window_start, channel, recipient);
DROP INDEX idx_notification_deliveries_window;
CREATE INDEX idx_notification_deliveries_event ON notification_deliveries(event_id);
CREATE INDEX idx_notification_deliveries_log ON notification_deliveries(organization_id, created_at, id);

-- +goose Down
DROP INDEX idx_notification_deliveries_log;
DROP INDEX idx_notification_deliveries_event;
CREATE INDEX idx_notification_deliveries_window ON notification_deliveries(workflow_id, channel, recipient, window_start);
DROP INDEX idx_notification_deliveries_minute;
