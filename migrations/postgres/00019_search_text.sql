-- +goose Up
-- What a search finds an execution or a dead letter by (issue 21): its subject, the values of
-- its input (never a secret's) and, for a dead letter, the reason, folded (lower case, no
-- diacritics: models.Fold), so that "kaminska" finds "Kamińska" on every database and in any
-- database locale. The engine writes it; rows from before are filled from their subject and
-- reason (their inputs are sealed at rest, so their values are not searchable).
ALTER TABLE workflow_executions ADD COLUMN search_text TEXT NOT NULL DEFAULT '';
ALTER TABLE dead_letter_queue ADD COLUMN search_text TEXT NOT NULL DEFAULT '';
UPDATE workflow_executions SET search_text = replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(lower(coalesce(subject, '')), 'ą', 'a'), 'ć', 'c'), 'ę', 'e'), 'ł', 'l'), 'ń', 'n'), 'ó', 'o'), 'ś', 's'), 'ź', 'z'), 'ż', 'z'), 'Ą', 'a'), 'Ć', 'c'), 'Ę', 'e'), 'Ł', 'l'), 'Ń', 'n'), 'Ó', 'o'), 'Ś', 's'), 'Ź', 'z'), 'Ż', 'z') WHERE subject IS NOT NULL;
UPDATE dead_letter_queue SET search_text = replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(lower(coalesce(subject, '') || chr(10) || reason), 'ą', 'a'), 'ć', 'c'), 'ę', 'e'), 'ł', 'l'), 'ń', 'n'), 'ó', 'o'), 'ś', 's'), 'ź', 'z'), 'ż', 'z'), 'Ą', 'a'), 'Ć', 'c'), 'Ę', 'e'), 'Ł', 'l'), 'Ń', 'n'), 'Ó', 'o'), 'Ś', 's'), 'Ź', 'z'), 'Ż', 'z');
-- Folded text is plain letters: trigrams are extracted whatever the database's locale.
CREATE INDEX idx_executions_search_trgm ON workflow_executions USING gin (search_text gin_trgm_ops);
CREATE INDEX idx_dlq_search_trgm ON dead_letter_queue USING gin (search_text gin_trgm_ops);

-- +goose Down
DROP INDEX idx_dlq_search_trgm;
DROP INDEX idx_executions_search_trgm;
ALTER TABLE dead_letter_queue DROP COLUMN search_text;
ALTER TABLE workflow_executions DROP COLUMN search_text;
