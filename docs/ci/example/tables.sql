-- Your domain's tables, which effects.yaml names: created before the inbox
-- pattern's own, in the scratch database `idemhook rules test` runs in.
CREATE TABLE IF NOT EXISTS orders (
  id text PRIMARY KEY,
  account text NOT NULL DEFAULT 'default',
  state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'confirmed', 'refunded')),
  amount bigint NOT NULL CHECK (amount >= 0),
  currency text NOT NULL,
  payment_intent text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
