-- The task store on Postgres: the seed's plugin_host.tasks plus what execution needs,
-- used confirmation-token ids, the application role, row-level security, the SECURITY
-- DEFINER functions for the non-tenant operations, and the stop notification.
--
-- Applied by `cyberos-mcp-bridge migrate` with an owner/admin URL, inside one transaction
-- that holds an advisory lock (src/adapters/postgres/migrate.rs). The role that runs it
-- owns the schema, the tables and the functions; the bridge itself works as
-- `plugin_host_app` (SET LOCAL ROLE in every transaction), which owns nothing.

CREATE SCHEMA IF NOT EXISTS plugin_host;

-- Long-running tool calls. Columns up to trace_id are the seed's, unchanged.
CREATE TABLE plugin_host.tasks (
    task_id          TEXT PRIMARY KEY,
    tenant_id        UUID NOT NULL,
    plugin_id        TEXT NOT NULL,
    tool_name        TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'cancelled')),
    input            JSONB NOT NULL,
    output           JSONB,
    error            JSONB,           -- {class, message, hint}
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    completed_at     TIMESTAMPTZ,
    timeout_at       TIMESTAMPTZ NOT NULL,
    trace_id         CHAR(32) NOT NULL,
    -- What execution needs: the latest progress message (the spec's statusMessage),
    -- retention, and the instance that runs the task with its lease.
    status_message   TEXT,
    expires_at       TIMESTAMPTZ NOT NULL,
    owner            TEXT NOT NULL,
    lease_expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX tasks_tenant_status_created ON plugin_host.tasks (tenant_id, status, created_at DESC);
-- tasks/list pages: newest first, ties broken by id.
CREATE INDEX tasks_tenant_created ON plugin_host.tasks (tenant_id, created_at DESC, task_id DESC);
-- renew_leases / stopped_among (by owner) and the sweep (expired leases, retention).
CREATE INDEX tasks_running_by_owner ON plugin_host.tasks (owner) WHERE status = 'running';
CREATE INDEX tasks_running_by_lease ON plugin_host.tasks (lease_expires_at) WHERE status = 'running';
CREATE INDEX tasks_by_expiry ON plugin_host.tasks (expires_at);

-- Used confirmation-token ids, kept until the token expires so each works once.
CREATE TABLE plugin_host.used_confirmations (
    tenant_id  UUID NOT NULL,
    jti        TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, jti)
);
CREATE INDEX used_confirmations_by_expiry ON plugin_host.used_confirmations (expires_at);

-- Row-level security, also for the owner (FORCE). The tenant comes from the
-- transaction-local setting `auth.tenant_id`. A missing setting reads as NULL, and one
-- that was set by an earlier transaction on the same connection reads as '' (NULLIF
-- turns both into NULL): no rows, never an error.
ALTER TABLE plugin_host.tasks ENABLE ROW LEVEL SECURITY;
ALTER TABLE plugin_host.tasks FORCE ROW LEVEL SECURITY;
CREATE POLICY tasks_rls ON plugin_host.tasks
    USING (tenant_id = NULLIF(current_setting('auth.tenant_id', true), '')::uuid)
    WITH CHECK (tenant_id = NULLIF(current_setting('auth.tenant_id', true), '')::uuid);

ALTER TABLE plugin_host.used_confirmations ENABLE ROW LEVEL SECURITY;
ALTER TABLE plugin_host.used_confirmations FORCE ROW LEVEL SECURITY;
CREATE POLICY used_confirmations_rls ON plugin_host.used_confirmations
    USING (tenant_id = NULLIF(current_setting('auth.tenant_id', true), '')::uuid)
    WITH CHECK (tenant_id = NULLIF(current_setting('auth.tenant_id', true), '')::uuid);

-- The SECURITY DEFINER functions below run as the owner, whom FORCE subjects to RLS
-- too. This policy lets the owner see every row only while one of those functions runs
-- (each turns plugin_host.maintenance on and back off around its statements). It
-- applies to the owner role alone, so plugin_host_app gains nothing from setting the
-- variable itself.
CREATE POLICY tasks_maintenance ON plugin_host.tasks TO CURRENT_USER
    USING (current_setting('plugin_host.maintenance', true) = 'on')
    WITH CHECK (current_setting('plugin_host.maintenance', true) = 'on');
CREATE POLICY used_confirmations_maintenance ON plugin_host.used_confirmations TO CURRENT_USER
    USING (current_setting('plugin_host.maintenance', true) = 'on')
    WITH CHECK (current_setting('plugin_host.maintenance', true) = 'on');

-- The application role: no login, no RLS bypass, owns nothing. Roles are cluster-wide
-- while the migration lock is per database, so a concurrent creation from a migration of
-- another database is tolerated.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'plugin_host_app') THEN
        BEGIN
            CREATE ROLE plugin_host_app NOLOGIN NOBYPASSRLS;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;
        END;
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_roles
               WHERE rolname = 'plugin_host_app' AND (rolsuper OR rolbypassrls)) THEN
        RAISE EXCEPTION 'role plugin_host_app exists with SUPERUSER or BYPASSRLS; row-level security would not hold'
            USING HINT = 'ALTER ROLE plugin_host_app NOSUPERUSER NOBYPASSRLS, then run migrate again.';
    END IF;
    -- The bridge switches to plugin_host_app in every transaction, so the role it logs in
    -- as must be a member. Superusers are members of every role; a plain migrating role
    -- (often the same URL the bridge runs with) is made one. Other login roles need
    -- `GRANT plugin_host_app TO <role>` from an operator.
    IF NOT pg_catalog.pg_has_role(current_user, 'plugin_host_app', 'MEMBER') THEN
        BEGIN
            EXECUTE format('GRANT plugin_host_app TO %I', current_user);
        EXCEPTION WHEN insufficient_privilege OR unique_violation THEN
            RAISE WARNING 'could not grant plugin_host_app to %; grant it to the role the bridge logs in as', current_user;
        END;
    END IF;
END
$$;

GRANT USAGE ON SCHEMA plugin_host TO plugin_host_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON plugin_host.tasks, plugin_host.used_confirmations TO plugin_host_app;

-- Non-tenant operations about the bridge's own instances (CONTRACT §6): the only way
-- plugin_host_app reaches rows of every tenant, each a fixed statement.

-- Each function turns plugin_host.maintenance on for its own statements and restores it
-- before returning (a function-level SET clause would be simpler, but non-superusers may
-- not attach placeholder variables to functions).

-- Extends the lease of every task `owner` is running; returns how many.
CREATE FUNCTION plugin_host.renew_leases(owner text, until timestamptz) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = plugin_host, pg_temp
AS $$
DECLARE
    before text := current_setting('plugin_host.maintenance', true);
    renewed bigint;
BEGIN
    PERFORM set_config('plugin_host.maintenance', 'on', true);
    UPDATE plugin_host.tasks AS t SET lease_expires_at = renew_leases.until
     WHERE t.owner = renew_leases.owner AND t.status = 'running';
    GET DIAGNOSTICS renewed = ROW_COUNT;
    PERFORM set_config('plugin_host.maintenance', coalesce(before, ''), true);
    RETURN renewed;
END
$$;

-- Which of `ids`, run by `owner`, are no longer running.
CREATE FUNCTION plugin_host.stopped_among(owner text, ids text[]) RETURNS SETOF text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = plugin_host, pg_temp
AS $$
DECLARE
    before text := current_setting('plugin_host.maintenance', true);
BEGIN
    PERFORM set_config('plugin_host.maintenance', 'on', true);
    RETURN QUERY
        SELECT t.task_id FROM plugin_host.tasks AS t
         WHERE t.owner = stopped_among.owner AND t.task_id = ANY (stopped_among.ids)
           AND t.status <> 'running';
    PERFORM set_config('plugin_host.maintenance', coalesce(before, ''), true);
END
$$;

-- Fails running tasks whose owner's lease expired before `now` (the values of
-- crate::domain::task::orphaned()), deletes finished tasks past their retention and
-- expired confirmation ids.
CREATE FUNCTION plugin_host.sweep(now timestamptz) RETURNS TABLE (orphaned bigint, expired bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = plugin_host, pg_temp
AS $$
DECLARE
    before text := current_setting('plugin_host.maintenance', true);
BEGIN
    PERFORM set_config('plugin_host.maintenance', 'on', true);
    UPDATE plugin_host.tasks AS t
       SET status = 'failed',
           error = jsonb_build_object(
               'class', 'internal_error',
               'message', 'the bridge running the task stopped',
               'hint', 'The bridge restarted while the task ran; run it again.'),
           status_message = 'The bridge restarted while the task ran; run it again.',
           updated_at = sweep.now,
           completed_at = sweep.now
     WHERE t.status = 'running' AND t.lease_expires_at < sweep.now;
    GET DIAGNOSTICS orphaned = ROW_COUNT;
    DELETE FROM plugin_host.tasks AS t WHERE t.expires_at < sweep.now AND t.status <> 'running';
    GET DIAGNOSTICS expired = ROW_COUNT;
    DELETE FROM plugin_host.used_confirmations AS c WHERE c.expires_at < sweep.now;
    PERFORM set_config('plugin_host.maintenance', coalesce(before, ''), true);
    RETURN NEXT;
END
$$;

REVOKE ALL ON FUNCTION plugin_host.renew_leases(text, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION plugin_host.stopped_among(text, text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION plugin_host.sweep(timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION plugin_host.renew_leases(text, timestamptz) TO plugin_host_app;
GRANT EXECUTE ON FUNCTION plugin_host.stopped_among(text, text[]) TO plugin_host_app;
GRANT EXECUTE ON FUNCTION plugin_host.sweep(timestamptz) TO plugin_host_app;

-- Other instances learn at once that a task stopped running (a cancel from any
-- instance, a sweep): LISTEN plugin_host_task_stopped, payload = task id. Delivered on
-- commit; instances also poll, since notifications are lost while a listener reconnects.
CREATE FUNCTION plugin_host.notify_task_stopped() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = plugin_host, pg_temp
AS $$
BEGIN
    PERFORM pg_notify('plugin_host_task_stopped', NEW.task_id);
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION plugin_host.notify_task_stopped() FROM PUBLIC;

CREATE TRIGGER tasks_notify_stopped
    AFTER UPDATE OF status ON plugin_host.tasks
    FOR EACH ROW
    WHEN (OLD.status = 'running' AND NEW.status <> 'running')
    EXECUTE FUNCTION plugin_host.notify_task_stopped();
