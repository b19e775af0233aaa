-- Each task's progress log: what a resumed SSE stream replays (the newest
-- PROGRESS_LOG_MAX entries per task are kept). Deleted with its task (foreign keys are on
-- for every connection), so the tasks sweep bounds it too.
CREATE TABLE IF NOT EXISTS task_progress (
    task_id    TEXT    NOT NULL REFERENCES tasks (task_id) ON DELETE CASCADE,
    tenant_id  TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    total      INTEGER,
    message    TEXT    NOT NULL,
    created_at INTEGER NOT NULL, -- Unix milliseconds
    PRIMARY KEY (task_id, seq)
) WITHOUT ROWID;
