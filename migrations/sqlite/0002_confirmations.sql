-- Used confirmation-token ids, kept until the token expires so each works once.
CREATE TABLE IF NOT EXISTS used_confirmations (
    tenant_id  TEXT    NOT NULL,
    jti        TEXT    NOT NULL,
    expires_at INTEGER NOT NULL,  -- Unix milliseconds
    PRIMARY KEY (tenant_id, jti)
);
CREATE INDEX IF NOT EXISTS used_confirmations_by_expiry ON used_confirmations (expires_at);
