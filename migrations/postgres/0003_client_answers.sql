-- Our requests to HTTP clients (elicitations) awaiting the client's answer, which may be
-- POSTed to another instance: it records the answer here and NOTIFYs, and the waiting
-- instance takes it. A row lives from the question until its waiter takes the answer or
-- gives up, and never past expires_at (expired rows of a tenant go on its next question).
CREATE TABLE plugin_host.client_answers (
    tenant_id  UUID NOT NULL,
    session    TEXT NOT NULL,         -- the HTTP session's nonce
    request_id TEXT NOT NULL,         -- our JSON-RPC request id (random)
    answer     TEXT,                  -- the result or error object (JSON), once answered
    is_error   BOOLEAN NOT NULL DEFAULT false,
    expires_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, session, request_id)
);
CREATE INDEX client_answers_by_expiry ON plugin_host.client_answers (tenant_id, expires_at);

-- The same isolation as the tables of 0001/0002: forced RLS, a strict tenant policy for
-- plugin_host_app, no policy for the owner.
ALTER TABLE plugin_host.client_answers ENABLE ROW LEVEL SECURITY;
ALTER TABLE plugin_host.client_answers FORCE ROW LEVEL SECURITY;
CREATE POLICY client_answers_tenant ON plugin_host.client_answers TO plugin_host_app
    USING (tenant_id = current_setting('auth.tenant_id')::uuid)
    WITH CHECK (tenant_id = current_setting('auth.tenant_id')::uuid);
GRANT SELECT, INSERT, UPDATE, DELETE ON plugin_host.client_answers TO plugin_host_app;
