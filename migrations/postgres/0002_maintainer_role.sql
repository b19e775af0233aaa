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

-- The functions of 0001 without the maintenance switch.
CREATE OR REPLACE FUNCTION plugin_host.renew_leases(owner text, until timestamptz) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = plugin_host, pg_temp
AS $$
DECLARE
    renewed bigint;
BEGIN
    UPDATE plugin_host.tasks AS t SET lease_expires_at = renew_leases.until
     WHERE t.owner = renew_leases.owner AND t.status = 'running';
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

-- Replaces 0001's sweep(now): a task that failed within `quick` of its creation is kept
-- `quick_retention` after it failed, not its whole ttl (crate::domain::task).
DROP FUNCTION plugin_host.sweep(timestamptz);
CREATE FUNCTION plugin_host.sweep(now timestamptz, quick interval, quick_retention interval)
    RETURNS TABLE (orphaned bigint, expired bigint)
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
REVOKE ALL ON FUNCTION plugin_host.sweep(timestamptz, interval, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION plugin_host.sweep(timestamptz, interval, interval) TO plugin_host_app;

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
    ALTER FUNCTION plugin_host.renew_leases(text, timestamptz) OWNER TO plugin_host_maintainer;
    ALTER FUNCTION plugin_host.stopped_among(text, text[]) OWNER TO plugin_host_maintainer;
    ALTER FUNCTION plugin_host.sweep(timestamptz, interval, interval) OWNER TO plugin_host_maintainer;
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
