-- Open questions are capped per subject as well as per tenant, so one user holding many
-- confirmation forms open cannot keep every other user of the tenant from being asked.
-- Rows opened before this migration belong to no subject (''); they expire within minutes.
ALTER TABLE client_answers ADD COLUMN subject TEXT NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS client_answers_by_subject ON client_answers (tenant_id, subject);
