-- Expired questions of every tenant go at the sweep. A row of client_answers outlives its
-- expiry only when the instance waiting on it died; 0003 deleted such rows at the
-- tenant's next question, so a tenant that never asked again kept them, and the answers
-- in them, for good.

CREATE POLICY client_answers_maintainer ON plugin_host.client_answers TO plugin_host_maintainer
    USING (true);
GRANT SELECT, DELETE ON plugin_host.client_answers TO plugin_host_maintainer;

-- Deletes every tenant's questions past their expiry; returns how many.
CREATE FUNCTION plugin_host.sweep_client_answers(now timestamptz) RETURNS bigint
    LANGUAGE sql SECURITY DEFINER
    SET search_path = plugin_host, pg_temp
AS $$
    WITH gone AS (
        DELETE FROM plugin_host.client_answers AS a
         WHERE a.expires_at < sweep_client_answers.now
        RETURNING 1
    )
    SELECT count(*) FROM gone;
$$;

REVOKE ALL ON FUNCTION plugin_host.sweep_client_answers(timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION plugin_host.sweep_client_answers(timestamptz) TO plugin_host_app;

-- Owned by the maintainer, as the functions of 0002 are (and with the same temporary
-- membership for an owner that is not a superuser).
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
    ALTER FUNCTION plugin_host.sweep_client_answers(timestamptz) OWNER TO plugin_host_maintainer;
    REVOKE CREATE ON SCHEMA plugin_host FROM plugin_host_maintainer;
    IF granted THEN
        EXECUTE format('REVOKE plugin_host_maintainer FROM %I', current_user);
    END IF;
END
$$;
