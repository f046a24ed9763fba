-- idemhook schema (keysvc keeps the keys in its own store and prunes them after its --retention:
-- only the example business step's table is here). Safe to run more than once.
-- Example business table used by the template. Replace it with your own step.
CREATE TABLE IF NOT EXISTS business_log (
  id bigserial PRIMARY KEY,
  event_key text NOT NULL,
  event_type text,
  created_at timestamptz NOT NULL DEFAULT now()
);
