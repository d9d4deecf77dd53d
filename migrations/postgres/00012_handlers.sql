-- +goose Up
-- On-failure handler steps (issue 13). A handler step's attempt names the attempt whose
-- failure it handles: its templates read that attempt's error and input, and the execution
-- page draws the arrow from the failed step to its handler.
ALTER TABLE step_executions ADD COLUMN handles_attempt_id UUID;

-- +goose Down
ALTER TABLE step_executions DROP COLUMN handles_attempt_id;
