-- +goose Up
-- Notifications per failure group (issue 22). An organization's defaults say whether a
-- dead letter notifies per group (the first failure of a new or reopened group, then at
-- most one follow-up an hour) or per failure (the old behaviour); a workflow's
-- settings.errorNotifications.notifyPer overrides it. A group's notification events carry
-- the group and the span of its items they stand for (covers_from exclusive, covers_until
-- inclusive, on dead_letter_queue.created_at): the next follow-up starts where the last one
-- ended, and the unique dedup key (group and covers_until) makes two engines that schedule
-- it at once record one. An in-app notification of a group is the user's one entry for it
-- (occurrences: the group's arrivals when it was last updated). A digested delivery names
-- its digest (digest_id): a digest names exactly the deliveries folded into it.
ALTER TABLE notification_settings ADD COLUMN notify_per VARCHAR(16) NOT NULL DEFAULT 'group';
ALTER TABLE notification_events ADD COLUMN group_id TEXT;
ALTER TABLE notification_events ADD COLUMN covers_from DATETIME;
ALTER TABLE notification_events ADD COLUMN covers_until DATETIME;
CREATE INDEX idx_notification_events_group ON notification_events(group_id, covers_until);
ALTER TABLE notification_deliveries ADD COLUMN digest_id TEXT;
CREATE INDEX idx_notification_deliveries_digest ON notification_deliveries(digest_id);
ALTER TABLE notifications ADD COLUMN group_id TEXT;
ALTER TABLE notifications ADD COLUMN occurrences INTEGER NOT NULL DEFAULT 1;
CREATE UNIQUE INDEX idx_notifications_group ON notifications(user_id, group_id) WHERE group_id IS NOT NULL;

-- +goose Down
DROP INDEX idx_notifications_group;
ALTER TABLE notifications DROP COLUMN occurrences;
ALTER TABLE notifications DROP COLUMN group_id;
DROP INDEX idx_notification_deliveries_digest;
ALTER TABLE notification_deliveries DROP COLUMN digest_id;
DROP INDEX idx_notification_events_group;
ALTER TABLE notification_events DROP COLUMN covers_until;
ALTER TABLE notification_events DROP COLUMN covers_from;
ALTER TABLE notification_events DROP COLUMN group_id;
ALTER TABLE notification_settings DROP COLUMN notify_per;
