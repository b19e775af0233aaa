-- Each task's progress log: what a resumed SSE stream replays, on any instance (the
-- bridge keeps the newest PROGRESS_LOG_MAX entries per task). Rows go with their task:
-- the sweep's DELETE cascades (referential actions run as the table owner and are not
-- subject to row-level security).

CREATE TABLE plugin_host.task_progress (
    task_id    TEXT NOT NULL REFERENCES plugin_host.tasks (task_id) ON DELETE CASCADE,
    tenant_id  UUID NOT NULL,
    seq        BIGINT NOT NULL CHECK (seq >= 0),
    total      BIGINT,
    message    TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (task_id, seq)
);

-- Tenant isolation as on plugin_host.tasks (0002): strict, for plugin_host_app only; the
-- owner matches no policy.
ALTER TABLE plugin_host.task_progress ENABLE ROW LEVEL SECURITY;
ALTER TABLE plugin_host.task_progress FORCE ROW LEVEL SECURITY;
CREATE POLICY task_progress_tenant ON plugin_host.task_progress TO plugin_host_app
    USING (tenant_id = current_setting('auth.tenant_id')::uuid)
    WITH CHECK (tenant_id = current_setting('auth.tenant_id')::uuid);

GRANT SELECT, INSERT, DELETE ON plugin_host.task_progress TO plugin_host_app;
