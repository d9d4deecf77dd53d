-- +goose Up
-- Half-open trial slots (issue 20). A slot is held by the attempt running its trial (the
-- attempt's id and generation, and a copy of its lease): it is free again once that attempt
-- has ended (it is no longer PENDING or RUNNING at that generation) or its lease has passed
-- (its process died), never because time passed since the breaker half-opened. At most
-- half_open_requests slots exist per breaker, so at most that many trials run at once,
-- across every process. They replace the trials counter.
CREATE TABLE circuit_breaker_trials (
    breaker_id TEXT NOT NULL REFERENCES circuit_breaker_state(id) ON DELETE CASCADE,
    slot INTEGER NOT NULL,
    attempt_id TEXT NOT NULL,
    generation INTEGER NOT NULL,
    lease_expires_at DATETIME NOT NULL,
    taken_at DATETIME NOT NULL,
    PRIMARY KEY (breaker_id, slot)
);
ALTER TABLE circuit_breaker_state DROP COLUMN trials;

-- +goose Down
ALTER TABLE circuit_breaker_state ADD COLUMN trials INTEGER NOT NULL DEFAULT 0;
DROP TABLE circuit_breaker_trials;
