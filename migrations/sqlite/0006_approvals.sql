-- Approvals kept for users whose host cannot ask them: bound to one call (tenant,
-- subject, tool, args digest), decided once on the page or at a terminal, used once by
-- the identical retry. A row lives until its retry uses it or it expires (swept).
CREATE TABLE IF NOT EXISTS approvals (
    id          TEXT    PRIMARY KEY,     -- 32 lowercase hex digits (128 random bits)
    tenant_id   TEXT    NOT NULL,
    subject     TEXT    NOT NULL,
    tool        TEXT    NOT NULL,
    args_sha256 TEXT    NOT NULL,
    arguments   TEXT    NOT NULL,        -- canonical JSON, shown to the user
    verdict     TEXT    NOT NULL DEFAULT 'pending', -- pending | approved | denied
    created_at  INTEGER NOT NULL,        -- Unix milliseconds
    expires_at  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS approvals_by_call
    ON approvals (tenant_id, subject, tool, args_sha256);
CREATE INDEX IF NOT EXISTS approvals_by_expiry ON approvals (expires_at);

-- The approval page's one-time secrets (a login's state, a form's token), by the
-- SHA-256 of their value; each is taken (deleted) by its one use.
CREATE TABLE IF NOT EXISTS approval_secrets (
    digest      TEXT    PRIMARY KEY,
    kind        TEXT    NOT NULL,        -- login | form
    approval_id TEXT    NOT NULL,
    tenant_id   TEXT    NOT NULL,
    subject     TEXT,                    -- the subject a login proved (form tokens)
    payload     TEXT    NOT NULL,        -- what a login's callback needs
    expires_at  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS approval_secrets_by_expiry ON approval_secrets (expires_at);
