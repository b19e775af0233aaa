-- No bypass for the owner: the SECURITY DEFINER functions run as a dedicated NOLOGIN role,
-- plugin_host_maintainer, with policies of its own, and the tenant policies apply to
-- plugin_host_app only and read `auth.tenant_id` strictly.
--
-- 0001 let the owner see every row while the setting `plugin_host.maintenance` was on,
-- so any session on the owner URL that skipped SET ROLE could read every tenant. Now the
-- owner matches no policy (FORCE: it sees nothing), and a plugin_host_app transaction
-- that forgot its tenant fails with an error instead of seeing zero rows.
--
-- Creating plugin_host_maintainer needs CREATEROLE; an owner without it needs an
-- operator to run, once: CREATE ROLE plugin_host_maintainer NOLOGIN; GRANT
-- plugin_host_maintainer TO <owner>; ALTER ROLE <owner> NOINHERIT (so the owner does not
-- hold the maintainer's policies).

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'plugin_host_maintainer') THEN
        BEGIN
            CREATE ROLE plugin_host_maintainer NOLOGIN NOBYPASSRLS NOINHERIT;
        EXCEPTION
            WHEN duplicate_object OR unique_violation THEN
                NULL;
            WHEN insufficient_privilege THEN
                RAISE EXCEPTION 'role plugin_host_maintainer does not exist and % may not create it', current_user
                    USING HINT = 'As an admin: CREATE ROLE plugin_host_maintainer NOLOGIN; GRANT plugin_host_maintainer TO <owner>; ALTER ROLE <owner> NOINHERIT; then run migrate again.';
        END;
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_roles
               WHERE rolname = 'plugin_host_maintainer' AND (rolsuper OR rolbypassrls OR rolcanlogin)) THEN
        RAISE EXCEPTION 'role plugin_host_maintainer exists with SUPERUSER, BYPASSRLS or LOGIN'
            USING HINT = 'ALTER ROLE plugin_host_maintainer NOSUPERUSER NOBYPASSRLS NOLOGIN, then run migrate again.';
    END IF;
END
$$;

DROP POLICY tasks_maintenance ON plugin_host.tasks;
DROP POLICY used_confirmations_maintenance ON plugin_host.used_confirmations;
DROP POLICY tasks_rls ON plugin_host.tasks;
DROP POLICY used_confirmations_rls ON plugin_host.used_confirmations;

-- Strict: without the setting `current_setting` raises 42704, and a setting left empty
-- by an earlier transaction on the connection fails the uuid cast (22P02).
CREATE POLICY tasks_tenant ON plugin_host.tasks TO plugin_host_app
    USING (tenant_id = current_setting('auth.tenant_id')::uuid)
    WITH CHECK (tenant_id = current_setting('auth.tenant_id')::uuid);
CREATE POLICY used_confirmations_tenant ON plugin_host.used_confirmations TO plugin_host_app
    USING (tenant_id = current_setting('auth.tenant_id')::uuid)
    WITH CHECK (tenant_id = current_setting('auth.tenant_id')::uuid);

-- The maintainer sees every row, for the fixed statements of the functions it owns.
CREATE POLICY tasks_maintainer ON plugin_host.tasks TO plugin_host_maintainer
    USING (true) WITH CHECK (true);
CREATE POLICY used_confirmations_maintainer ON plugin_host.used_confirmations TO plugin_host_maintainer
    USING (true);
GRANT USAGE ON SCHEMA plugin_host TO plugin_host_maintainer;
GRANT SELECT, UPDATE, DELETE ON plugin_host.tasks TO plugin_host_maintainer;
GRANT SELECT, DELETE ON plugin_host.used_confirmations TO plugin_host_maintainer;

-- The functions of 0001, without the maintenance switch and with what tasks need to always
-- end (#14): renew_leases renews only the runs live on the calling instance (0001 renewed
-- every running row of the owner, including rows whose run had ended without its outcome
-- being stored: they stayed running forever); the sweep also fails running rows past
-- `timeout_at` plus a grace whatever their lease, and deletes tasks that failed at once
-- sooner (crate::domain::task). New signatures; 0001's are dropped.
DROP FUNCTION plugin_host.renew_leases(text, timestamptz);
DROP FUNCTION plugin_host.sweep(timestamptz);

-- Extends the lease of those of `ids` that `owner` runs and that are still running;
-- returns how many.
CREATE FUNCTION plugin_host.renew_leases(owner text, ids text[], until timestamptz) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = plugin_host, pg_temp
AS $$
DECLARE
    renewed bigint;
BEGIN
    UPDATE plugin_host.tasks AS t SET lease_expires_at = renew_leases.until
     WHERE t.owner = renew_leases.owner AND t.task_id = ANY (renew_leases.ids)
       AND t.status = 'running';
    GET DIAGNOSTICS renewed = ROW_COUNT;
    RETURN renewed;
END
$$;

CREATE OR REPLACE FUNCTION plugin_host.stopped_among(owner text, ids text[]) RETURNS SETOF text
    LANGUAGE sql SECURITY DEFINER
    SET search_path = plugin_host, pg_temp
AS $$
    SELECT t.task_id FROM plugin_host.tasks AS t
     WHERE t.owner = stopped_among.owner AND t.task_id = ANY (stopped_among.ids)
       AND t.status <> 'running';
$$;

-- Fails running tasks whose owner's lease expired before `now` (crate::domain::task::
-- orphaned()), then running tasks whose timeout_at + `overdue_grace` is before `now`
-- (overdue()); deletes finished tasks past their retention (for a task that failed within
-- `quick` of its creation, `quick_retention` after it failed) and expired confirmation ids.
CREATE FUNCTION plugin_host.sweep(now timestamptz, overdue_grace interval, quick interval,
                                  quick_retention interval)
    RETURNS TABLE (orphaned bigint, overdue bigint, expired bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = plugin_host, pg_temp
AS $$
BEGIN
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
    UPDATE plugin_host.tasks AS t
       SET status = 'failed',
           error = jsonb_build_object(
               'class', 'internal_error',
               'message', 'the task timed out',
               'hint', 'It passed its timeout and its outcome was never recorded; run it again.'),
           status_message = 'It passed its timeout and its outcome was never recorded; run it again.',
           updated_at = sweep.now,
           completed_at = sweep.now
     WHERE t.status = 'running' AND t.timeout_at < sweep.now - sweep.overdue_grace;
    GET DIAGNOSTICS overdue = ROW_COUNT;
    DELETE FROM plugin_host.tasks AS t
     WHERE t.status <> 'running'
       AND (t.expires_at < sweep.now
            OR (t.status = 'failed' AND t.completed_at - t.created_at < sweep.quick
                AND t.completed_at + sweep.quick_retention < sweep.now));
    GET DIAGNOSTICS expired = ROW_COUNT;
    DELETE FROM plugin_host.used_confirmations AS c WHERE c.expires_at < sweep.now;
    RETURN NEXT;
END
$$;

-- The sweep's second statement: running rows by deadline.
CREATE INDEX tasks_running_by_timeout ON plugin_host.tasks (timeout_at) WHERE status = 'running';

REVOKE ALL ON FUNCTION plugin_host.renew_leases(text, text[], timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION plugin_host.sweep(timestamptz, interval, interval, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION plugin_host.renew_leases(text, text[], timestamptz) TO plugin_host_app;
GRANT EXECUTE ON FUNCTION plugin_host.sweep(timestamptz, interval, interval, interval) TO plugin_host_app;

-- Hand the functions to the maintainer. A non-superuser owner must be able to act as the
-- new owner, and the new owner needs CREATE on the schema, for the moment of the change
-- only: the membership this migration grants itself is revoked again.
DO $$
DECLARE
    superuser boolean := (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user);
    granted boolean := false;
BEGIN
    IF NOT superuser AND NOT pg_catalog.pg_has_role(current_user, 'plugin_host_maintainer', 'MEMBER') THEN
        EXECUTE format('GRANT plugin_host_maintainer TO %I', current_user);
        granted := true;
    END IF;
    GRANT CREATE ON SCHEMA plugin_host TO plugin_host_maintainer;
    ALTER FUNCTION plugin_host.renew_leases(text, text[], timestamptz) OWNER TO plugin_host_maintainer;
    ALTER FUNCTION plugin_host.stopped_among(text, text[]) OWNER TO plugin_host_maintainer;
    ALTER FUNCTION plugin_host.sweep(timestamptz, interval, interval, interval) OWNER TO plugin_host_maintainer;
    REVOKE CREATE ON SCHEMA plugin_host FROM plugin_host_maintainer;
    IF granted THEN
        EXECUTE format('REVOKE plugin_host_maintainer FROM %I', current_user);
    END IF;
    IF NOT superuser AND pg_catalog.pg_has_role(current_user, 'plugin_host_maintainer', 'USAGE') THEN
        RAISE EXCEPTION '% holds the privileges of plugin_host_maintainer, which sees every tenant''s rows', current_user
            USING HINT = 'ALTER ROLE <owner> NOINHERIT (it stays a member, for migrate), then run migrate again.';
    END IF;
END
$$;
