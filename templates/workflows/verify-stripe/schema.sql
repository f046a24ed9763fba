-- idemhook schema (guard: lease). Safe to run more than once.
CREATE TABLE IF NOT EXISTS processed_events (
  key text PRIMARY KEY,
  first_seen timestamptz NOT NULL DEFAULT now()
);
-- Cleanup deletes by age.
CREATE INDEX IF NOT EXISTS processed_events_first_seen_idx ON processed_events (first_seen);
-- Lease guard: an attempt holds the key while it runs; 'done' is final.
ALTER TABLE processed_events
  ADD COLUMN IF NOT EXISTS state text NOT NULL DEFAULT 'done' CHECK (state IN ('processing', 'done')),
  ADD COLUMN IF NOT EXISTS lease_until timestamptz,
  ADD COLUMN IF NOT EXISTS attempts integer NOT NULL DEFAULT 1;
-- Example business table used by the template. Replace it with your own step.
CREATE TABLE IF NOT EXISTS business_log (
  id bigserial PRIMARY KEY,
  event_key text NOT NULL,
  event_type text,
  created_at timestamptz NOT NULL DEFAULT now()
);
