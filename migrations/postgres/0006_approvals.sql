-- Approvals kept for users whose host cannot ask them: bound to one call (tenant,
-- subject, tool, args digest), decided once on the page or at a terminal, used once by
-- the identical retry. A row lives until its retry uses it or it expires (swept).
CREATE TABLE plugin_host.approvals (
    id          TEXT PRIMARY KEY,          -- 32 lowercase hex digits (128 random bits)
    tenant_id   UUID NOT NULL,
    subject     TEXT NOT NULL,
    tool        TEXT NOT NULL,
    args_sha256 TEXT NOT NULL,
    arguments   TEXT NOT NULL,             -- canonical JSON, shown to the user
    verdict     TEXT NOT NULL DEFAULT 'pending'
                CHECK (verdict IN ('pending', 'approved', 'denied')),
    created_at  TIMESTAMPTZ NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX approvals_by_call
    ON plugin_host.approvals (tenant_id, subject, tool, args_sha256);
CREATE INDEX approvals_by_expiry ON plugin_host.approvals (expires_at);

-- The approval page's one-time secrets (a login's state, a form's token), by the SHA-256
-- of their value; each is taken (deleted) by its one use.
CREATE TABLE plugin_host.approval_secrets (
    digest      TEXT PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('login', 'form')),
    approval_id TEXT NOT NULL,
    tenant_id   UUID NOT NULL,
    subject     TEXT,                      -- the subject a login proved (form tokens)
    payload     TEXT NOT NULL,             -- what a login's callback needs
    expires_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX approval_secrets_by_expiry ON plugin_host.approval_secrets (expires_at);

-- The isolation of every other table: forced RLS, a strict tenant policy for
-- plugin_host_app, every row for the maintainer's fixed functions, none for the owner.
ALTER TABLE plugin_host.approvals ENABLE ROW LEVEL SECURITY;
ALTER TABLE plugin_host.approvals FORCE ROW LEVEL SECURITY;
CREATE POLICY approvals_tenant ON plugin_host.approvals TO plugin_host_app
    USING (tenant_id = current_setting('auth.tenant_id')::uuid)
    WITH CHECK (tenant_id = current_setting('auth.tenant_id')::uuid);
CREATE POLICY approvals_maintainer ON plugin_host.approvals TO plugin_host_maintainer
    USING (true);
GRANT SELECT, INSERT, UPDATE, DELETE ON plugin_host.approvals TO plugin_host_app;
GRANT SELECT, DELETE ON plugin_host.approvals TO plugin_host_maintainer;

ALTER TABLE plugin_host.approval_secrets ENABLE ROW LEVEL SECURITY;
ALTER TABLE plugin_host.approval_secrets FORCE ROW LEVEL SECURITY;
CREATE POLICY approval_secrets_tenant ON plugin_host.approval_secrets TO plugin_host_app
    USING (tenant_id = current_setting('auth.tenant_id')::uuid)
    WITH CHECK (tenant_id = current_setting('auth.tenant_id')::uuid);
CREATE POLICY approval_secrets_maintainer ON plugin_host.approval_secrets TO plugin_host_maintainer
    USING (true);
GRANT SELECT, INSERT, DELETE ON plugin_host.approval_secrets TO plugin_host_app;
GRANT SELECT, DELETE ON plugin_host.approval_secrets TO plugin_host_maintainer;

-- The page opens an approval by its id before it knows the tenant: the one row of that id,
-- if it has not expired. The id is 128 random bits, so only its link finds it.
CREATE FUNCTION plugin_host.find_approval(approval_id text, now timestamptz)
    RETURNS SETOF plugin_host.approvals
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = plugin_host, pg_temp
AS $$
    SELECT * FROM plugin_host.approvals AS a
     WHERE a.id = find_approval.approval_id AND a.expires_at > find_approval.now;
$$;

-- A login's callback takes its state before it knows the tenant: deletes and returns the
-- unexpired secret of that kind and digest.
CREATE FUNCTION plugin_host.take_approval_secret(kind text, digest text, now timestamptz)
    RETURNS SETOF plugin_host.approval_secrets
    LANGUAGE sql SECURITY DEFINER
    SET search_path = plugin_host, pg_temp
AS $$
    DELETE FROM plugin_host.approval_secrets AS s
     WHERE s.digest = take_approval_secret.digest AND s.kind = take_approval_secret.kind
       AND s.expires_at > take_approval_secret.now
    RETURNING *;
$$;

-- Deletes every tenant's expired approvals and secrets; returns how many.
CREATE FUNCTION plugin_host.sweep_approvals(now timestamptz) RETURNS bigint
    LANGUAGE sql SECURITY DEFINER
    SET search_path = plugin_host, pg_temp
AS $$
    WITH a AS (
        DELETE FROM plugin_host.approvals WHERE expires_at <= sweep_approvals.now RETURNING 1
    ), s AS (
        DELETE FROM plugin_host.approval_secrets WHERE expires_at <= sweep_approvals.now RETURNING 1
    )
    SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM s);
$$;

REVOKE ALL ON FUNCTION plugin_host.find_approval(text, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION plugin_host.take_approval_secret(text, text, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION plugin_host.sweep_approvals(timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION plugin_host.find_approval(text, timestamptz) TO plugin_host_app;
GRANT EXECUTE ON FUNCTION plugin_host.take_approval_secret(text, text, timestamptz) TO plugin_host_app;
GRANT EXECUTE ON FUNCTION plugin_host.sweep_approvals(timestamptz) TO plugin_host_app;

-- Owned by the maintainer, as the functions of 0002 and 0005 are (with the same temporary
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
    ALTER FUNCTION plugin_host.find_approval(text, timestamptz) OWNER TO plugin_host_maintainer;
    ALTER FUNCTION plugin_host.take_approval_secret(text, text, timestamptz) OWNER TO plugin_host_maintainer;
    ALTER FUNCTION plugin_host.sweep_approvals(timestamptz) OWNER TO plugin_host_maintainer;
    REVOKE CREATE ON SCHEMA plugin_host FROM plugin_host_maintainer;
    IF granted THEN
        EXECUTE format('REVOKE plugin_host_maintainer FROM %I', current_user);
    END IF;
END
$$;
