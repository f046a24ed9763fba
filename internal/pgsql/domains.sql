{{/* The example domains of the rules presets: schema.sql creates the
     tables of the preset it compiles. A user's own rules name tables that
     exist already. */}}
{{define "orders"}}
-- Example domain (rules preset stripe-orders): amounts in the currency's
-- minor unit, as Stripe sends them.
CREATE TABLE IF NOT EXISTS {{.Table}} (
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
CREATE TABLE IF NOT EXISTS {{.Table}} (
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
{{define "shop_orders"}}
-- Example domain (rules preset shopify-orders): a Shopify order, paid then
-- fulfilled, perhaps cancelled, refunded in parts. Shopify's ids are numbers
-- (kept as text) and its amounts decimal strings (kept as numeric); one row
-- per shop (account: the shop's domain) and order.
CREATE TABLE IF NOT EXISTS {{.Table}} (
  id text NOT NULL,
  account text NOT NULL DEFAULT 'default',
  state text NOT NULL DEFAULT 'paid' CHECK (state IN ('paid', 'cancelled')),
  name text,
  total_price numeric CHECK (total_price >= 0),
  currency text,
  cancel_reason text,
  last_refund text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account, id)
);
{{end}}
{{define "deployments"}}
-- Example domain (rules preset github-deployments): a GitHub deployment
-- that an outside service performs, from its creation to its final status
-- and its retirement. One row per App installation (account) and
-- deployment.
CREATE TABLE IF NOT EXISTS {{.Table}} (
  id text NOT NULL,
  account text NOT NULL DEFAULT 'default',
  state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'succeeded', 'failed', 'inactive')),
  repository text,
  environment text,
  ref text,
  sha text,
  final_status text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account, id)
);
{{end}}
{{define "invoices"}}
-- Example domain (rules preset standardwebhooks-generic): an invoice of a
-- SaaS sender that signs as Standard Webhooks prescribes, opened, then paid
-- or voided. Amounts in the currency's minor unit.
CREATE TABLE IF NOT EXISTS {{.Table}} (
  id text NOT NULL,
  account text NOT NULL DEFAULT 'default',
  state text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'paid', 'void')),
  customer text,
  amount bigint CHECK (amount >= 0),
  currency text,
  payment text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account, id)
);
{{end}}
