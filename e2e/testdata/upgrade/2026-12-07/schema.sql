-- idemhook schema (guard: reserve). Safe to run more than once.
CREATE TABLE IF NOT EXISTS upg_processed_events (
  key text PRIMARY KEY,
  first_seen timestamptz NOT NULL DEFAULT now()
);
-- Cleanup deletes by age.
CREATE INDEX IF NOT EXISTS upg_processed_events_first_seen_idx ON upg_processed_events (first_seen);
-- Example business table used by the template. Replace it with your own step.
CREATE TABLE IF NOT EXISTS upg_business_log (
  id bigserial PRIMARY KEY,
  event_key text NOT NULL,
  event_type text,
  created_at timestamptz NOT NULL DEFAULT now()
);
