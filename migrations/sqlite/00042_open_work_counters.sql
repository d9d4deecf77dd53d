-- +goose Up
-- Counters of open work (issue 23's performance line): what the Today page, the deadlines API
-- and the at-risk banner count and sum, kept as the work changes, so that they read as many
-- rows as there are obligations, periods and due dates (and clients for the money by client)
-- instead of every open item. Each table holds insert-only deltas (folded = 0), written by the
-- triggers below in the transaction that changes an execution or a dead letter, and folded
-- rows (folded = 1, one or more per key) that models.DB.FoldOpenWork sums them into, with the
-- reconciler; a reader sums both. No row is updated by a writer, so a bulk of one client's
-- failures makes no hot row. A row without a due date, client or amount fires nothing.
--   open_work: per source ('e' executions not succeeded, 'd' dead letters pending or being
--     processed), obligation, period, due date and currency: items, failed (executions
--     dead-lettered), priced (items with an amount), amount_minor (their sum), and the
--     distinct clients per period (clients) and per obligation and due date (due_clients),
--     which only the fold writes (it sees when a client's count crosses zero).
--   open_work_clients: the items per client of the same keys (client '' for none).
--   open_client_money: the open dead letters with a client and an amount, per client and
--     currency.
-- NULL obligation, period, client and currency are kept as ''.
CREATE TABLE open_work (
    id              INTEGER PRIMARY KEY,
    organization_id TEXT NOT NULL,
    src             CHAR(1) NOT NULL,
    obligation      TEXT NOT NULL,
    period          TEXT NOT NULL,
    due_on          TEXT NOT NULL,
    currency        TEXT NOT NULL,
    items           BIGINT NOT NULL DEFAULT 0,
    failed          BIGINT NOT NULL DEFAULT 0,
    priced          BIGINT NOT NULL DEFAULT 0,
    amount_minor    BIGINT NOT NULL DEFAULT 0,
    clients         BIGINT NOT NULL DEFAULT 0,
    due_clients     BIGINT NOT NULL DEFAULT 0,
    folded          SMALLINT NOT NULL DEFAULT 0
);
CREATE INDEX idx_open_work ON open_work(organization_id, src, due_on, obligation, period, currency);
CREATE INDEX idx_open_work_deltas ON open_work(organization_id) WHERE folded = 0;
CREATE TABLE open_work_clients (
    id              INTEGER PRIMARY KEY,
    organization_id TEXT NOT NULL,
    src             CHAR(1) NOT NULL,
    obligation      TEXT NOT NULL,
    period          TEXT NOT NULL,
    due_on          TEXT NOT NULL,
    client          TEXT NOT NULL,
    items           BIGINT NOT NULL DEFAULT 0,
    folded          SMALLINT NOT NULL DEFAULT 0
);
CREATE INDEX idx_open_work_clients ON open_work_clients(organization_id, src, obligation, due_on, client, period);
CREATE INDEX idx_open_work_clients_deltas ON open_work_clients(organization_id, src, due_on) WHERE folded = 0;
CREATE TABLE open_client_money (
    id              INTEGER PRIMARY KEY,
    organization_id TEXT NOT NULL,
    client          TEXT NOT NULL,
    currency        TEXT NOT NULL,
    items           BIGINT NOT NULL DEFAULT 0,
    amount_minor    BIGINT NOT NULL DEFAULT 0,
    folded          SMALLINT NOT NULL DEFAULT 0
);
CREATE INDEX idx_open_client_money ON open_client_money(organization_id, client, currency);
CREATE INDEX idx_open_client_money_deltas ON open_client_money(organization_id) WHERE folded = 0;

-- +goose StatementBegin
CREATE TRIGGER open_work_execution_insert AFTER INSERT ON workflow_executions FOR EACH ROW
    WHEN NEW.due_on IS NOT NULL AND NEW.status <> 'SUCCEEDED'
BEGIN
    INSERT INTO open_work (organization_id, src, obligation, period, due_on, currency, items, failed, priced, amount_minor)
    SELECT NEW.organization_id, 'e', COALESCE(NEW.obligation, ''), COALESCE(NEW.period, ''), NEW.due_on, COALESCE(NEW.currency, ''),
           1, CASE WHEN NEW.status = 'DLQ_PENDING' THEN 1 ELSE 0 END, CASE WHEN NEW.amount_minor IS NULL THEN 0 ELSE 1 END,
           COALESCE(NEW.amount_minor, 0)
    WHERE NEW.due_on IS NOT NULL AND NEW.status <> 'SUCCEEDED';
    INSERT INTO open_work_clients (organization_id, src, obligation, period, due_on, client, items)
    SELECT NEW.organization_id, 'e', COALESCE(NEW.obligation, ''), COALESCE(NEW.period, ''), NEW.due_on, COALESCE(NEW.client, ''), 1
    WHERE NEW.due_on IS NOT NULL AND NEW.status <> 'SUCCEEDED';
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER open_work_execution_update AFTER UPDATE ON workflow_executions FOR EACH ROW
    WHEN (OLD.due_on IS NOT NULL OR NEW.due_on IS NOT NULL) AND (
        (OLD.status = 'SUCCEEDED') <> (NEW.status = 'SUCCEEDED') OR (OLD.status = 'DLQ_PENDING') <> (NEW.status = 'DLQ_PENDING')
        OR OLD.due_on IS NOT NEW.due_on OR OLD.obligation IS NOT NEW.obligation
        OR OLD.period IS NOT NEW.period OR OLD.client IS NOT NEW.client
        OR OLD.currency IS NOT NEW.currency OR OLD.amount_minor IS NOT NEW.amount_minor
        OR OLD.organization_id <> NEW.organization_id)
BEGIN
    INSERT INTO open_work (organization_id, src, obligation, period, due_on, currency, items, failed, priced, amount_minor)
    SELECT OLD.organization_id, 'e', COALESCE(OLD.obligation, ''), COALESCE(OLD.period, ''), OLD.due_on, COALESCE(OLD.currency, ''),
           -1, CASE WHEN OLD.status = 'DLQ_PENDING' THEN -1 ELSE 0 END, CASE WHEN OLD.amount_minor IS NULL THEN 0 ELSE -1 END,
           -COALESCE(OLD.amount_minor, 0)
    WHERE OLD.due_on IS NOT NULL AND OLD.status <> 'SUCCEEDED';
    INSERT INTO open_work_clients (organization_id, src, obligation, period, due_on, client, items)
    SELECT OLD.organization_id, 'e', COALESCE(OLD.obligation, ''), COALESCE(OLD.period, ''), OLD.due_on, COALESCE(OLD.client, ''), -1
    WHERE OLD.due_on IS NOT NULL AND OLD.status <> 'SUCCEEDED';
    INSERT INTO open_work (organization_id, src, obligation, period, due_on, currency, items, failed, priced, amount_minor)
    SELECT NEW.organization_id, 'e', COALESCE(NEW.obligation, ''), COALESCE(NEW.period, ''), NEW.due_on, COALESCE(NEW.currency, ''),
           1, CASE WHEN NEW.status = 'DLQ_PENDING' THEN 1 ELSE 0 END, CASE WHEN NEW.amount_minor IS NULL THEN 0 ELSE 1 END,
           COALESCE(NEW.amount_minor, 0)
    WHERE NEW.due_on IS NOT NULL AND NEW.status <> 'SUCCEEDED';
    INSERT INTO open_work_clients (organization_id, src, obligation, period, due_on, client, items)
    SELECT NEW.organization_id, 'e', COALESCE(NEW.obligation, ''), COALESCE(NEW.period, ''), NEW.due_on, COALESCE(NEW.client, ''), 1
    WHERE NEW.due_on IS NOT NULL AND NEW.status <> 'SUCCEEDED';
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER open_work_execution_delete AFTER DELETE ON workflow_executions FOR EACH ROW
    WHEN OLD.due_on IS NOT NULL AND OLD.status <> 'SUCCEEDED'
BEGIN
    INSERT INTO open_work (organization_id, src, obligation, period, due_on, currency, items, failed, priced, amount_minor)
    SELECT OLD.organization_id, 'e', COALESCE(OLD.obligation, ''), COALESCE(OLD.period, ''), OLD.due_on, COALESCE(OLD.currency, ''),
           -1, CASE WHEN OLD.status = 'DLQ_PENDING' THEN -1 ELSE 0 END, CASE WHEN OLD.amount_minor IS NULL THEN 0 ELSE -1 END,
           -COALESCE(OLD.amount_minor, 0)
    WHERE OLD.due_on IS NOT NULL AND OLD.status <> 'SUCCEEDED';
    INSERT INTO open_work_clients (organization_id, src, obligation, period, due_on, client, items)
    SELECT OLD.organization_id, 'e', COALESCE(OLD.obligation, ''), COALESCE(OLD.period, ''), OLD.due_on, COALESCE(OLD.client, ''), -1
    WHERE OLD.due_on IS NOT NULL AND OLD.status <> 'SUCCEEDED';
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER open_work_dead_letter_insert AFTER INSERT ON dead_letter_queue FOR EACH ROW
    WHEN NEW.status IN ('pending', 'processing') AND (NEW.due_on IS NOT NULL OR (NEW.client IS NOT NULL AND NEW.amount_minor IS NOT NULL))
BEGIN
    INSERT INTO open_work (organization_id, src, obligation, period, due_on, currency, items, priced, amount_minor)
    SELECT NEW.organization_id, 'd', COALESCE(NEW.obligation, ''), COALESCE(NEW.period, ''), NEW.due_on, COALESCE(NEW.currency, ''),
           1, CASE WHEN NEW.amount_minor IS NULL THEN 0 ELSE 1 END, COALESCE(NEW.amount_minor, 0)
    WHERE NEW.status IN ('pending', 'processing') AND NEW.due_on IS NOT NULL;
    INSERT INTO open_work_clients (organization_id, src, obligation, period, due_on, client, items)
    SELECT NEW.organization_id, 'd', COALESCE(NEW.obligation, ''), COALESCE(NEW.period, ''), NEW.due_on, COALESCE(NEW.client, ''), 1
    WHERE NEW.status IN ('pending', 'processing') AND NEW.due_on IS NOT NULL;
    INSERT INTO open_client_money (organization_id, client, currency, items, amount_minor)
    SELECT NEW.organization_id, NEW.client, COALESCE(NEW.currency, ''), 1, NEW.amount_minor
    WHERE NEW.status IN ('pending', 'processing') AND NEW.client IS NOT NULL AND NEW.amount_minor IS NOT NULL;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER open_work_dead_letter_update AFTER UPDATE ON dead_letter_queue FOR EACH ROW
    WHEN (OLD.due_on IS NOT NULL OR NEW.due_on IS NOT NULL OR OLD.client IS NOT NULL OR NEW.client IS NOT NULL) AND (
        (OLD.status IN ('pending', 'processing')) <> (NEW.status IN ('pending', 'processing'))
        OR OLD.due_on IS NOT NEW.due_on OR OLD.obligation IS NOT NEW.obligation
        OR OLD.period IS NOT NEW.period OR OLD.client IS NOT NEW.client
        OR OLD.currency IS NOT NEW.currency OR OLD.amount_minor IS NOT NEW.amount_minor
        OR OLD.organization_id <> NEW.organization_id)
BEGIN
    INSERT INTO open_work (organization_id, src, obligation, period, due_on, currency, items, priced, amount_minor)
    SELECT OLD.organization_id, 'd', COALESCE(OLD.obligation, ''), COALESCE(OLD.period, ''), OLD.due_on, COALESCE(OLD.currency, ''),
           -1, CASE WHEN OLD.amount_minor IS NULL THEN 0 ELSE -1 END, -COALESCE(OLD.amount_minor, 0)
    WHERE OLD.status IN ('pending', 'processing') AND OLD.due_on IS NOT NULL;
    INSERT INTO open_work_clients (organization_id, src, obligation, period, due_on, client, items)
    SELECT OLD.organization_id, 'd', COALESCE(OLD.obligation, ''), COALESCE(OLD.period, ''), OLD.due_on, COALESCE(OLD.client, ''), -1
    WHERE OLD.status IN ('pending', 'processing') AND OLD.due_on IS NOT NULL;
    INSERT INTO open_client_money (organization_id, client, currency, items, amount_minor)
    SELECT OLD.organization_id, OLD.client, COALESCE(OLD.currency, ''), -1, -OLD.amount_minor
    WHERE OLD.status IN ('pending', 'processing') AND OLD.client IS NOT NULL AND OLD.amount_minor IS NOT NULL;
    INSERT INTO open_work (organization_id, src, obligation, period, due_on, currency, items, priced, amount_minor)
    SELECT NEW.organization_id, 'd', COALESCE(NEW.obligation, ''), COALESCE(NEW.period, ''), NEW.due_on, COALESCE(NEW.currency, ''),
           1, CASE WHEN NEW.amount_minor IS NULL THEN 0 ELSE 1 END, COALESCE(NEW.amount_minor, 0)
    WHERE NEW.status IN ('pending', 'processing') AND NEW.due_on IS NOT NULL;
    INSERT INTO open_work_clients (organization_id, src, obligation, period, due_on, client, items)
    SELECT NEW.organization_id, 'd', COALESCE(NEW.obligation, ''), COALESCE(NEW.period, ''), NEW.due_on, COALESCE(NEW.client, ''), 1
    WHERE NEW.status IN ('pending', 'processing') AND NEW.due_on IS NOT NULL;
    INSERT INTO open_client_money (organization_id, client, currency, items, amount_minor)
    SELECT NEW.organization_id, NEW.client, COALESCE(NEW.currency, ''), 1, NEW.amount_minor
    WHERE NEW.status IN ('pending', 'processing') AND NEW.client IS NOT NULL AND NEW.amount_minor IS NOT NULL;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER open_work_dead_letter_delete AFTER DELETE ON dead_letter_queue FOR EACH ROW
    WHEN OLD.status IN ('pending', 'processing') AND (OLD.due_on IS NOT NULL OR (OLD.client IS NOT NULL AND OLD.amount_minor IS NOT NULL))
BEGIN
    INSERT INTO open_work (organization_id, src, obligation, period, due_on, currency, items, priced, amount_minor)
    SELECT OLD.organization_id, 'd', COALESCE(OLD.obligation, ''), COALESCE(OLD.period, ''), OLD.due_on, COALESCE(OLD.currency, ''),
           -1, CASE WHEN OLD.amount_minor IS NULL THEN 0 ELSE -1 END, -COALESCE(OLD.amount_minor, 0)
    WHERE OLD.status IN ('pending', 'processing') AND OLD.due_on IS NOT NULL;
    INSERT INTO open_work_clients (organization_id, src, obligation, period, due_on, client, items)
    SELECT OLD.organization_id, 'd', COALESCE(OLD.obligation, ''), COALESCE(OLD.period, ''), OLD.due_on, COALESCE(OLD.client, ''), -1
    WHERE OLD.status IN ('pending', 'processing') AND OLD.due_on IS NOT NULL;
    INSERT INTO open_client_money (organization_id, client, currency, items, amount_minor)
    SELECT OLD.organization_id, OLD.client, COALESCE(OLD.currency, ''), -1, -OLD.amount_minor
    WHERE OLD.status IN ('pending', 'processing') AND OLD.client IS NOT NULL AND OLD.amount_minor IS NOT NULL;
END;
-- +goose StatementEnd

-- What is open now.
INSERT INTO open_work (organization_id, src, obligation, period, due_on, currency, items, failed, priced, amount_minor, folded)
SELECT organization_id, 'e', COALESCE(obligation, ''), COALESCE(period, ''), due_on, COALESCE(currency, ''), COUNT(*),
       SUM(CASE WHEN status = 'DLQ_PENDING' THEN 1 ELSE 0 END), COUNT(amount_minor), COALESCE(SUM(amount_minor), 0), 1
FROM workflow_executions WHERE due_on IS NOT NULL AND status <> 'SUCCEEDED'
GROUP BY organization_id, COALESCE(obligation, ''), COALESCE(period, ''), due_on, COALESCE(currency, '');
INSERT INTO open_work (organization_id, src, obligation, period, due_on, currency, items, failed, priced, amount_minor, folded)
SELECT organization_id, 'd', COALESCE(obligation, ''), COALESCE(period, ''), due_on, COALESCE(currency, ''), COUNT(*),
       0, COUNT(amount_minor), COALESCE(SUM(amount_minor), 0), 1
FROM dead_letter_queue WHERE due_on IS NOT NULL AND status IN ('pending', 'processing')
GROUP BY organization_id, COALESCE(obligation, ''), COALESCE(period, ''), due_on, COALESCE(currency, '');
INSERT INTO open_work_clients (organization_id, src, obligation, period, due_on, client, items, folded)
SELECT organization_id, 'e', COALESCE(obligation, ''), COALESCE(period, ''), due_on, COALESCE(client, ''), COUNT(*), 1
FROM workflow_executions WHERE due_on IS NOT NULL AND status <> 'SUCCEEDED'
GROUP BY organization_id, COALESCE(obligation, ''), COALESCE(period, ''), due_on, COALESCE(client, '');
INSERT INTO open_work_clients (organization_id, src, obligation, period, due_on, client, items, folded)
SELECT organization_id, 'd', COALESCE(obligation, ''), COALESCE(period, ''), due_on, COALESCE(client, ''), COUNT(*), 1
FROM dead_letter_queue WHERE due_on IS NOT NULL AND status IN ('pending', 'processing')
GROUP BY organization_id, COALESCE(obligation, ''), COALESCE(period, ''), due_on, COALESCE(client, '');
INSERT INTO open_work (organization_id, src, obligation, period, due_on, currency, clients, folded)
SELECT organization_id, src, obligation, period, due_on, '', COUNT(*), 1
FROM open_work_clients WHERE folded = 1 AND (src = 'd' OR client <> '')
GROUP BY organization_id, src, obligation, period, due_on;
INSERT INTO open_work (organization_id, src, obligation, period, due_on, currency, due_clients, folded)
SELECT organization_id, src, obligation, '', due_on, '', COUNT(DISTINCT client), 1
FROM open_work_clients WHERE folded = 1 AND (src = 'd' OR client <> '')
GROUP BY organization_id, src, obligation, due_on;
INSERT INTO open_client_money (organization_id, client, currency, items, amount_minor, folded)
SELECT organization_id, client, COALESCE(currency, ''), COUNT(*), SUM(amount_minor), 1
FROM dead_letter_queue WHERE client IS NOT NULL AND amount_minor IS NOT NULL AND status IN ('pending', 'processing')
GROUP BY organization_id, client, COALESCE(currency, '');

-- +goose Down
DROP TRIGGER open_work_dead_letter_delete;
DROP TRIGGER open_work_dead_letter_update;
DROP TRIGGER open_work_dead_letter_insert;
DROP TRIGGER open_work_execution_delete;
DROP TRIGGER open_work_execution_update;
DROP TRIGGER open_work_execution_insert;
DROP TABLE open_client_money;
DROP TABLE open_work_clients;
DROP TABLE open_work;
