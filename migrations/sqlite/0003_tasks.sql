-- Long-running tool calls (the seed's plugin_host.tasks, plus what execution needs).
CREATE TABLE IF NOT EXISTS tasks (
    task_id          TEXT    PRIMARY KEY,
    tenant_id        TEXT    NOT NULL,
    plugin_id        TEXT    NOT NULL DEFAULT 'cyberos',
    tool_name        TEXT    NOT NULL,
    status           TEXT    NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'cancelled')),
    input            TEXT    NOT NULL,
    output           TEXT,
    error            TEXT,             -- JSON {class, message, hint}
    status_message   TEXT,
    created_at       INTEGER NOT NULL, -- Unix milliseconds, as are all times here
    updated_at       INTEGER NOT NULL,
    completed_at     INTEGER,
    timeout_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    trace_id         TEXT    NOT NULL CHECK (length(trace_id) = 32),
    owner            TEXT    NOT NULL,
    lease_expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_by_tenant ON tasks (tenant_id, created_at DESC, task_id DESC);
CREATE INDEX IF NOT EXISTS tasks_running_by_owner ON tasks (owner) WHERE status = 'running';
CREATE INDEX IF NOT EXISTS tasks_by_expiry ON tasks (expires_at);
