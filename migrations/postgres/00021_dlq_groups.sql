-- +goose Up
-- Failure groups (issue 22): the dead letters of one problem. A group is its organization's
-- by fingerprint (services/fingerprint: the workflow, the failed step, the error type and
-- code, the reason with its variable parts replaced, and the rules' version, so a change of
-- rules makes new groups and leaves the old ones theirs). Its counts are computed from its
-- items (group_id); arrivals counts every item that ever joined it. State: open, resolved
-- (when its last pending item closed; resolved_before keeps when it was resolved before it
-- came back, reopened_at when it did), muted (collects silently until muted_until, on the
-- database clock). split_from names the group an item was split out of (its fingerprint is
-- "split:" and its own id: no failure joins it later).
-- Dead letters made before this migration get their groups from the backfill at start
-- (engine.BackfillGroups: rows with no group_id, idempotent), since the normalizer is Go.
CREATE TABLE dlq_groups (
    id              UUID PRIMARY KEY,
    organization_id UUID NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    fingerprint     VARCHAR(100) NOT NULL,
    version         INTEGER NOT NULL,
    workflow_id     UUID NOT NULL REFERENCES workflows(id),
    step_id         VARCHAR(100) NOT NULL,
    error_type      VARCHAR(32) NOT NULL,
    error_code      VARCHAR(50) NOT NULL DEFAULT '',
    title           TEXT NOT NULL,
    search_text     TEXT NOT NULL DEFAULT '',
    state           VARCHAR(16) NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'resolved', 'muted')),
    muted_until     TIMESTAMPTZ,
    split_from      UUID,
    arrivals        INTEGER NOT NULL DEFAULT 0,
    first_seen_at   TIMESTAMPTZ NOT NULL,
    last_seen_at    TIMESTAMPTZ NOT NULL,
    resolved_at     TIMESTAMPTZ,
    resolved_before TIMESTAMPTZ,
    reopened_at     TIMESTAMPTZ,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX idx_dlq_groups_fingerprint ON dlq_groups (organization_id, fingerprint);
CREATE INDEX idx_dlq_groups_seen ON dlq_groups (organization_id, last_seen_at DESC, id DESC);

ALTER TABLE dead_letter_queue ADD COLUMN group_id UUID REFERENCES dlq_groups(id) ON DELETE SET NULL;
CREATE INDEX idx_dlq_group ON dead_letter_queue (group_id, status, created_at DESC) WHERE group_id IS NOT NULL;
CREATE INDEX idx_dlq_ungrouped ON dead_letter_queue (created_at) WHERE group_id IS NULL;

-- +goose Down
DROP INDEX idx_dlq_ungrouped;
DROP INDEX idx_dlq_group;
ALTER TABLE dead_letter_queue DROP COLUMN group_id;
DROP TABLE dlq_groups;
