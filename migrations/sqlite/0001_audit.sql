-- The embedded audit log: append-only, tenant-scoped.
CREATE TABLE IF NOT EXISTS audit_entries (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    audit_id        TEXT    NOT NULL UNIQUE,
    tenant_id       TEXT    NOT NULL,
    kind            TEXT    NOT NULL,
    actor_id        TEXT    NOT NULL,
    subject         TEXT,
    body            TEXT    NOT NULL,
    recorded_at     INTEGER NOT NULL,  -- Unix milliseconds
    trace_id        TEXT    NOT NULL,
    idempotency_key TEXT    NOT NULL,
    UNIQUE (tenant_id, idempotency_key)
);
CREATE INDEX IF NOT EXISTS audit_entries_by_tenant ON audit_entries (tenant_id, seq DESC);
CREATE TRIGGER IF NOT EXISTS audit_entries_no_update BEFORE UPDATE ON audit_entries
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_entries_no_delete BEFORE DELETE ON audit_entries
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
