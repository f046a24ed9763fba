-- idemhook schema (guard: at-most-once). Safe to run more than once.
CREATE TABLE IF NOT EXISTS processed_events (
  key text PRIMARY KEY,
  first_seen timestamptz NOT NULL DEFAULT now()
);
-- Cleanup deletes by age.
CREATE INDEX IF NOT EXISTS processed_events_first_seen_idx ON processed_events (first_seen);
-- Example business table used by the template. Replace it with your own step.
CREATE TABLE IF NOT EXISTS business_log (
  id bigserial PRIMARY KEY,
  event_key text NOT NULL,
  event_type text,
  created_at timestamptz NOT NULL DEFAULT now()
);
