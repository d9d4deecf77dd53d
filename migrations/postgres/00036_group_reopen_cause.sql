-- +goose Up
-- Why a resolved failure group is open again (issue 22's loose ends): 'recurrence' (a new
-- failure of its problem arrived, JoinGroup) or 'item_reopened' (an admin reopened one of its
-- items closed by hand, ReopenDeadLetter). NULL: never reopened, or reopened before this
-- column (a recurrence: nothing else reopened groups then).
ALTER TABLE dlq_groups ADD COLUMN reopen_cause VARCHAR(16);

-- +goose Down
ALTER TABLE dlq_groups DROP COLUMN reopen_cause;
