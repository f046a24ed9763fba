{{/* The example domains of the rules presets: schema.sql creates the
     tables of the preset it compiles. A user's own rules name tables that
     exist already. */}}
{{define "orders"}}
-- Example domain (rules preset stripe-orders): amounts in the currency's
-- minor unit, as Stripe sends them.
CREATE TABLE IF NOT EXISTS {{.Orders}} (
  id text PRIMARY KEY,
  account text NOT NULL DEFAULT 'default',
  state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'confirmed', 'refunded')),
  amount bigint NOT NULL CHECK (amount >= 0),
  currency text NOT NULL,
  payment_intent text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
{{end}}
{{define "subscriptions"}}
-- Example domain (rules preset stripe-subscriptions): a customer's account
-- opened by a subscription, changed, paid and closed. Times are Stripe's
-- Unix seconds.
CREATE TABLE IF NOT EXISTS {{.Subscriptions}} (
  id text PRIMARY KEY,
  account text NOT NULL DEFAULT 'default',
  state text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'closed')),
  customer text NOT NULL,
  status text,
  price text,
  quantity bigint,
  current_period_end bigint,
  -- The created time of the last subscription event applied: an older
  -- update arriving late is ignored.
  last_event_at bigint,
  latest_invoice text,
  paid_through bigint,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
{{end}}
