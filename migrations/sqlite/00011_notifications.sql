-- +goose Up
-- Error notifications (issue 11). notification_settings holds an organization's defaults
-- (a workflow's settings.errorNotifications overrides them); webhook URLs are sealed
-- (AES-256-GCM, bound to the row, like db_connections.dsn). notification_events records
-- what happened; notification_deliveries is the outbox: one row per event × channel ×
-- recipient, created in the transaction that records the failure, sent by a dispatcher
-- that claims due rows with a lease (compare-and-set on status and claim_token).
CREATE TABLE notification_settings (
    organization_id TEXT PRIMARY KEY REFERENCES organizations(id) ON DELETE CASCADE,
    enabled BOOLEAN NOT NULL DEFAULT TRUE,
    channels TEXT NOT NULL DEFAULT '["email","app"]',
    recipients TEXT NOT NULL DEFAULT '[]',
    slack_webhook_url TEXT,
    teams_webhook_url TEXT,
    notify_on_first_failure BOOLEAN NOT NULL DEFAULT FALSE,
    notify_on_retry_exhausted BOOLEAN NOT NULL DEFAULT TRUE,
    notify_on_dlq BOOLEAN NOT NULL DEFAULT TRUE,
    notify_on_breaker_open BOOLEAN NOT NULL DEFAULT FALSE,
    digest_threshold INTEGER NOT NULL DEFAULT 10 CHECK (digest_threshold >= 1),
    updated_by TEXT,
    updated_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);

CREATE TABLE notification_events (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    kind VARCHAR(30) NOT NULL,
    workflow_id TEXT NOT NULL DEFAULT '',
    execution_id TEXT NOT NULL DEFAULT '',
    payload TEXT NOT NULL,
    dedup_key VARCHAR(300) NOT NULL UNIQUE,
    created_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE INDEX idx_notification_events_exec ON notification_events(organization_id, execution_id);

CREATE TABLE notification_deliveries (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    event_id TEXT REFERENCES notification_events(id) ON DELETE CASCADE,
    workflow_id TEXT NOT NULL DEFAULT '',
    execution_id TEXT NOT NULL DEFAULT '',
    channel VARCHAR(10) NOT NULL CHECK (channel IN ('email', 'app', 'slack', 'teams')),
    recipient VARCHAR(400) NOT NULL,
    target TEXT,
    event_kind VARCHAR(30) NOT NULL,
    status VARCHAR(10) NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sending', 'sent', 'failed', 'digested')),
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    next_attempt_at DATETIME NOT NULL,
    lease_until DATETIME,
    claim_token TEXT,
    sent_at DATETIME,
    window_start DATETIME NOT NULL,
    dedup_key VARCHAR(400) NOT NULL,
    created_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT unique_notification_delivery UNIQUE (dedup_key)
);
CREATE INDEX idx_notification_deliveries_due ON notification_deliveries(status, next_attempt_at);
CREATE INDEX idx_notification_deliveries_window ON notification_deliveries(workflow_id, channel, recipient, window_start);
CREATE INDEX idx_notification_deliveries_exec ON notification_deliveries(organization_id, execution_id);

CREATE TABLE notifications (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    delivery_id TEXT NOT NULL UNIQUE REFERENCES notification_deliveries(id) ON DELETE CASCADE,
    kind VARCHAR(30) NOT NULL,
    title TEXT NOT NULL,
    body TEXT NOT NULL DEFAULT '',
    link TEXT NOT NULL DEFAULT '',
    execution_id TEXT NOT NULL DEFAULT '',
    created_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    read_at DATETIME
);
CREATE INDEX idx_notifications_user ON notifications(organization_id, user_id, created_at);

-- +goose Down
DROP TABLE notifications;
DROP TABLE notification_deliveries;
DROP TABLE notification_events;
DROP TABLE notification_settings;
