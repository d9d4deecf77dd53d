-- +goose Up
-- Escalation of problems left pending (issue 22). organizations.escalation_policy: the
-- organization's levels, a JSON array of {"afterMs": n, "to": ["role:admin", "user@…"]}
-- in increasing afterMs ('[]': no escalation). A failure group records the level it reached
-- (dlq_groups.escalation_level, 0: none), since when (escalated_at) and whom that level
-- named then (escalated_to, a JSON array); the engine's escalation pass raises the level
-- with a guarded update, and resolving the group clears it. The index finds the groups
-- being escalated (the pass's catch-up of their items' error records).
ALTER TABLE organizations ADD COLUMN escalation_policy TEXT NOT NULL DEFAULT '[]';
ALTER TABLE dlq_groups ADD COLUMN escalation_level INTEGER NOT NULL DEFAULT 0;
ALTER TABLE dlq_groups ADD COLUMN escalated_at TIMESTAMPTZ;
ALTER TABLE dlq_groups ADD COLUMN escalated_to TEXT;
CREATE INDEX idx_dlq_groups_escalated ON dlq_groups (organization_id) WHERE escalation_level > 0;

-- +goose Down
DROP INDEX idx_dlq_groups_escalated;
ALTER TABLE dlq_groups DROP COLUMN escalated_to;
ALTER TABLE dlq_groups DROP COLUMN escalated_at;
ALTER TABLE dlq_groups DROP COLUMN escalation_level;
ALTER TABLE organizations DROP COLUMN escalation_policy;
