-- Our requests to HTTP clients (elicitations) awaiting the client's answer, which may be
-- POSTed to another bridge process sharing this file. A row lives from the question until
-- its waiter takes the answer or gives up, and never past expires_at.
CREATE TABLE IF NOT EXISTS client_answers (
    tenant_id  TEXT    NOT NULL,
    session    TEXT    NOT NULL,  -- the HTTP session's nonce
    request_id TEXT    NOT NULL,  -- our JSON-RPC request id (random)
    answer     TEXT,              -- the result or error object, once answered
    is_error   INTEGER NOT NULL DEFAULT 0,
    expires_at INTEGER NOT NULL,  -- Unix milliseconds
    PRIMARY KEY (tenant_id, session, request_id)
);
CREATE INDEX IF NOT EXISTS client_answers_by_expiry ON client_answers (expires_at);
