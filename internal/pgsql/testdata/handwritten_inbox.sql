-- Inbox pattern: receipt is not effect.
--   inbox_events  one row per received event, unique per (account, event_id);
--                 the receiver saves it before it answers 200.
--   effects       one row per business effect, unique per effect_key, written
--                 in the same transaction as the business change.
--   {{.Orders.Name}}        the example domain; replace it with your own (README).
--   outbox_tasks  external calls saved with the effect and delivered later,
--                 each with a stable operation_key.
-- Safe to run more than once: it creates what is missing and replaces only
-- the functions idemhook owns.
{{template "receipts" .}}
{{define "receipts"}}
{{- if .Schema}}
CREATE SCHEMA IF NOT EXISTS {{.Schema}};
{{- end}}

CREATE TABLE IF NOT EXISTS {{.Inbox}} (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account text NOT NULL,
  -- The receipt key of the key spec: evt:<provider event id>, or sha256:<hex>.
  event_id text NOT NULL,
  event_type text NOT NULL DEFAULT '',
  body bytea NOT NULL,
  headers jsonb NOT NULL DEFAULT '{}',
  state text NOT NULL DEFAULT 'received' CHECK (state IN
    ('received', 'processing', 'processed', 'ignored', 'rejected', 'deferred', 'failed', 'forwarded')),
  -- Why a row ended where it did: applied, effect_exists, type_not_allowed, …
  outcome text,
  attempts integer NOT NULL DEFAULT 0,
  claimed_until timestamptz,
  next_attempt_at timestamptz,
  last_error text,
  received_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz,
  -- The keysvc endpoint that received it; NULL for the n8n receiver.
  endpoint text,
  -- What a deferred row waits for (an order id): the effect that changes it
  -- makes the row due at once instead of at its backoff.
  waiting_for text,
  UNIQUE (account, event_id)
);
-- Added after the first release: a schema created before gets it here.
ALTER TABLE {{.Inbox}} ADD COLUMN IF NOT EXISTS waiting_for text;
-- The recoverer's query: unfinished work only.
CREATE INDEX IF NOT EXISTS {{.Inbox.Name}}_unfinished_idx ON {{.Inbox}} (state, next_attempt_at)
  WHERE state IN ('received', 'processing', 'deferred');
CREATE INDEX IF NOT EXISTS {{.Inbox.Name}}_waiting_idx ON {{.Inbox}} (account, waiting_for)
  WHERE state = 'deferred';
{{end}}
{{define "deliveries"}}
-- keysvc's delivery attempts of each received event to its endpoint's target.
CREATE TABLE IF NOT EXISTS {{.Deliveries}} (
  inbox_id bigint NOT NULL REFERENCES {{.Inbox}} (id) ON DELETE CASCADE,
  attempt integer NOT NULL,
  at timestamptz NOT NULL DEFAULT now(),
  status integer,
  error text,
  duration_ms integer NOT NULL
);
CREATE INDEX IF NOT EXISTS {{.Deliveries.Name}}_inbox_idx ON {{.Deliveries}} (inbox_id, at);
{{end}}
CREATE TABLE IF NOT EXISTS {{.Effects}} (
  effect_key text PRIMARY KEY,
  inbox_id bigint REFERENCES {{.Inbox}} (id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Example domain: amounts in the currency's minor unit, as Stripe sends them.
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

CREATE TABLE IF NOT EXISTS {{.Outbox}} (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  -- Stable across every retry; sent as the Idempotency-Key header.
  operation_key text NOT NULL UNIQUE,
  kind text NOT NULL,
  payload jsonb NOT NULL,
  inbox_id bigint REFERENCES {{.Inbox}} (id) ON DELETE SET NULL,
  state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sending', 'sent', 'ambiguous', 'failed')),
  -- Every claim counts: sends and lookups.
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  claimed_until timestamptz,
  last_error text,
  last_status integer,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  sent_at timestamptz
);
CREATE INDEX IF NOT EXISTS {{.Outbox.Name}}_due_idx ON {{.Outbox}} (next_attempt_at)
  WHERE state IN ('pending', 'sending', 'ambiguous');

-- {{.ApplyEvent}} decides what one claimed inbox row does to the business,
-- in one transaction (the function call is one statement):
--   a type outside p_allowed                 -> ignored, nothing written
--   missing or inconsistent required data    -> rejected, the reason in last_error
--   a transition not allowed yet             -> deferred, retried after p_backoff
--                                               doubled per attempt (at most
--                                               15 minutes), or at once when the
--                                               effect it waits for happens;
--                                               failed once older than p_defer_limit
--   an effect already recorded               -> processed, outcome effect_exists
--   otherwise: the effect key, the order change, the outbox tasks and the
--   inbox row's final state are written together, or none of them.
-- An error inside the decision (a trigger, a constraint, a deadlock) rolls
-- back what the decision wrote, and only that: the row stays processing with
-- the database's message in last_error and is retried after the same backoff
-- (ClaimEvent fails it after its attempts). The error is caught here, in the
-- row's own subtransaction, so that a caller running several rows in one
-- transaction loses none of the others.
-- p_attempt fences the call: a worker whose claim was taken over (its lease
-- expired) changes nothing. The order row is locked first, so two events
-- proposing the same effect are serialised; the second then finds the effect
-- (each statement of a plpgsql function reads the latest committed data).
DROP FUNCTION IF EXISTS {{.ApplyEvent}}(bigint, integer, text[], interval);
CREATE OR REPLACE FUNCTION {{.ApplyEvent}}(p_inbox_id bigint, p_attempt integer, p_allowed text[], p_defer_limit interval,
  p_backoff interval)
RETURNS TABLE (inbox_id bigint, state text, outcome text, detail text, tasks integer)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
  ev {{.Inbox}}%ROWTYPE;
  ord {{.Orders}}%ROWTYPE;
  doc jsonb;
  obj jsonb;
  v_state text;
  v_outcome text;
  v_detail text;
  v_action text;
  v_order_id text;
  v_pi text;
  v_charge text;
  v_amount jsonb;
  v_currency text;
  v_effect text;
  v_waiting text;
  v_tasks integer := 0;
  v_backoff interval;
  v_sqlstate text;
BEGIN
  SELECT * INTO ev FROM {{.Inbox}} WHERE id = p_inbox_id FOR UPDATE;
  IF NOT FOUND OR ev.state <> 'processing' OR ev.attempts <> p_attempt THEN
    RETURN QUERY SELECT p_inbox_id, coalesce(ev.state, 'missing'), 'not_claimed'::text,
      'this attempt does not hold the event (finished, or taken over after its claim expired)'::text, 0;
    RETURN;
  END IF;
  v_backoff := least(p_backoff * power(2, least(ev.attempts - 1, 20)), interval '15 minutes');

  BEGIN
    <<decide>>
    BEGIN
      IF NOT (ev.event_type = ANY (p_allowed)) THEN
        v_state := 'ignored'; v_outcome := 'type_not_allowed';
        v_detail := format('event type %L is not in the allowlist', ev.event_type);
        EXIT decide;
      END IF;
      BEGIN
        doc := convert_from(ev.body, 'UTF8')::jsonb;
      EXCEPTION WHEN others THEN
        doc := NULL;
      END;
      obj := doc -> 'data' -> 'object';
      IF jsonb_typeof(obj) IS DISTINCT FROM 'object' THEN
        v_state := 'rejected'; v_outcome := 'no_data_object'; v_detail := 'the body is not a JSON event with data.object';
        EXIT decide;
      END IF;
      v_order_id := obj -> 'metadata' ->> 'order_id';
      IF coalesce(v_order_id, '') = '' THEN
        v_state := 'rejected'; v_outcome := 'missing_order_id'; v_detail := 'data.object.metadata.order_id is missing';
        EXIT decide;
      END IF;
      v_currency := obj ->> 'currency';
      CASE ev.event_type
        WHEN 'payment_intent.succeeded' THEN
          v_action := 'confirm'; v_pi := obj ->> 'id'; v_amount := coalesce(obj -> 'amount_received', obj -> 'amount');
        WHEN 'checkout.session.completed' THEN
          v_action := 'confirm'; v_pi := obj ->> 'payment_intent'; v_amount := obj -> 'amount_total';
          IF obj ->> 'payment_status' IS DISTINCT FROM 'paid' THEN
            v_state := 'ignored'; v_outcome := 'not_paid';
            v_detail := format('payment_status is %s: the payment confirms the order when it succeeds', coalesce(obj ->> 'payment_status', 'missing'));
            EXIT decide;
          END IF;
        WHEN 'charge.refunded' THEN
          v_action := 'refund'; v_charge := obj ->> 'id'; v_pi := obj ->> 'payment_intent'; v_amount := obj -> 'amount_refunded';
          IF coalesce(v_charge, '') = '' THEN
            v_state := 'rejected'; v_outcome := 'missing_charge'; v_detail := 'data.object.id (the charge) is missing';
            EXIT decide;
          END IF;
          IF obj -> 'refunded' IS DISTINCT FROM 'true'::jsonb THEN
            v_state := 'rejected'; v_outcome := 'partial_refund';
            v_detail := 'a partial refund: the example domain applies full refunds only';
            EXIT decide;
          END IF;
        ELSE
          v_state := 'rejected'; v_outcome := 'no_rule';
          v_detail := format('event type %L is allowed but {{.ApplyEvent}} has no rule for it', ev.event_type);
          EXIT decide;
      END CASE;
      IF coalesce(v_pi, '') = '' THEN
        v_state := 'rejected'; v_outcome := 'missing_payment_intent'; v_detail := 'the payment intent is missing';
        EXIT decide;
      END IF;
      IF jsonb_typeof(v_amount) IS DISTINCT FROM 'number' OR coalesce(v_currency, '') = '' THEN
        v_state := 'rejected'; v_outcome := 'missing_amount'; v_detail := 'the amount or the currency is missing';
        EXIT decide;
      END IF;
      IF v_action = 'confirm' THEN
        v_effect := 'confirm_order:' || v_order_id || ':' || v_pi;
      ELSE
        v_effect := 'refund_order:' || v_order_id || ':' || v_charge;
      END IF;

      SELECT * INTO ord FROM {{.Orders}} WHERE id = v_order_id AND account = ev.account FOR UPDATE;
      IF NOT FOUND THEN
        v_state := 'deferred'; v_outcome := 'order_unknown'; v_waiting := v_order_id;
        v_detail := format('no order %L for account %L yet', v_order_id, ev.account);
        EXIT decide;
      END IF;
      IF EXISTS (SELECT 1 FROM {{.Effects}} WHERE effect_key = v_effect) THEN
        v_state := 'processed'; v_outcome := 'effect_exists';
        v_detail := format('effect %s was recorded by an earlier event', v_effect);
        EXIT decide;
      END IF;
      IF lower(v_currency) <> lower(ord.currency) OR v_amount::numeric <> ord.amount THEN
        v_state := 'rejected'; v_outcome := 'amount_mismatch';
        v_detail := format('the event says %s %s, order %s is %s %s', v_amount, v_currency, ord.id, ord.amount, ord.currency);
        EXIT decide;
      END IF;
      IF v_action = 'confirm' AND ord.state <> 'pending' THEN
        v_state := 'rejected'; v_outcome := 'order_not_pending';
        v_detail := format('order %s is already %s by payment %s', ord.id, ord.state, ord.payment_intent);
        EXIT decide;
      END IF;
      IF v_action = 'refund' THEN
        IF ord.state = 'pending' THEN
          v_state := 'deferred'; v_outcome := 'order_not_confirmed'; v_waiting := ord.id;
          v_detail := format('order %s is not confirmed yet: the refund waits for its payment', ord.id);
          EXIT decide;
        END IF;
        IF ord.state = 'refunded' OR ord.payment_intent IS DISTINCT FROM v_pi THEN
          v_state := 'rejected'; v_outcome := 'refund_mismatch';
          v_detail := format('order %s is %s by payment %s; the refund is for %s', ord.id, ord.state, ord.payment_intent, v_pi);
          EXIT decide;
        END IF;
      END IF;

      INSERT INTO {{.Effects}} (effect_key, inbox_id) VALUES (v_effect, ev.id) ON CONFLICT DO NOTHING;
      IF NOT FOUND THEN
        v_state := 'processed'; v_outcome := 'effect_exists'; v_detail := format('effect %s was recorded concurrently', v_effect);
        EXIT decide;
      END IF;
      IF v_action = 'confirm' THEN
        UPDATE {{.Orders}} SET state = 'confirmed', payment_intent = v_pi, updated_at = now() WHERE id = ord.id;
        INSERT INTO {{.Outbox}} (operation_key, kind, payload, inbox_id)
        VALUES ('order_confirmation:' || ord.id, 'order_confirmation',
          jsonb_build_object('kind', 'order_confirmation', 'order_id', ord.id, 'account', ord.account,
            'amount', ord.amount, 'currency', ord.currency, 'payment_intent', v_pi), ev.id)
        ON CONFLICT (operation_key) DO NOTHING;
        GET DIAGNOSTICS v_tasks = ROW_COUNT;
        -- A refund that arrived before this payment is due now; other
        -- deferred rows of the account keep their turn.
        UPDATE {{.Inbox}} SET next_attempt_at = now()
        WHERE state = 'deferred' AND account = ev.account AND waiting_for = ord.id AND next_attempt_at > now();
      ELSE
        UPDATE {{.Orders}} SET state = 'refunded', updated_at = now() WHERE id = ord.id;
        INSERT INTO {{.Outbox}} (operation_key, kind, payload, inbox_id)
        VALUES ('refund_notice:' || ord.id || ':' || v_charge, 'refund_notice',
          jsonb_build_object('kind', 'refund_notice', 'order_id', ord.id, 'account', ord.account,
            'amount', ord.amount, 'currency', ord.currency, 'charge', v_charge), ev.id)
        ON CONFLICT (operation_key) DO NOTHING;
        GET DIAGNOSTICS v_tasks = ROW_COUNT;
      END IF;
      v_state := 'processed'; v_outcome := 'applied'; v_detail := v_effect;
    END decide;

    IF v_state = 'deferred' AND now() - ev.received_at > p_defer_limit THEN
      v_state := 'failed';
      v_detail := format('%s; gave up: deferred for longer than %s', v_detail, p_defer_limit);
    END IF;
    UPDATE {{.Inbox}} SET
      state = v_state,
      outcome = v_outcome,
      last_error = CASE WHEN v_state = 'processed' THEN NULL ELSE v_detail END,
      claimed_until = NULL,
      next_attempt_at = CASE WHEN v_state = 'deferred' THEN now() + v_backoff END,
      waiting_for = CASE WHEN v_state = 'deferred' THEN v_waiting END,
      finished_at = CASE WHEN v_state <> 'deferred' THEN now() END,
      updated_at = now()
    WHERE id = ev.id;
  EXCEPTION WHEN others THEN
    -- Everything this block wrote is rolled back; the row lock is kept.
    GET STACKED DIAGNOSTICS v_detail = MESSAGE_TEXT, v_sqlstate = RETURNED_SQLSTATE;
    v_state := 'processing'; v_outcome := 'error'; v_tasks := 0;
    v_detail := format('the decision failed: %s (SQLSTATE %s); retried after %s', v_detail, v_sqlstate, v_backoff);
    UPDATE {{.Inbox}} SET outcome = v_outcome, last_error = left(v_detail, 2000),
      claimed_until = now() + v_backoff, updated_at = now()
    WHERE id = ev.id;
  END;
  RETURN QUERY SELECT ev.id, v_state, v_outcome, v_detail, v_tasks;
END
$fn$;

-- {{.OutboxResult}} records the answer to one outbox call (a send, or the
-- lookup that reconciles an uncertain one) and decides the task's next state:
--   send:   2xx -> sent; 408, 409, 429, 5xx -> pending with backoff (failed
--           after p_max_attempts); other statuses -> failed, the answer kept;
--           no connection (refused, unknown host) -> pending with backoff;
--           any other transport error (timeout, reset) -> ambiguous: the call
--           may have been performed, so it is looked up before any resend.
--   lookup: 2xx -> sent; 404 -> pending and due now, so the dispatcher's
--           send phase resends it with the same key; anything else -> stays
--           ambiguous, looked up again later.
-- p_attempt fences the call as in {{.ApplyEvent}}.
CREATE OR REPLACE FUNCTION {{.OutboxResult}}(p_id bigint, p_attempt integer, p_phase text, p_status integer,
  p_error text, p_body text, p_max_attempts integer, p_backoff interval)
RETURNS TABLE (id bigint, operation_key text, state text, resend boolean)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
  t {{.Outbox}}%ROWTYPE;
  v_state text;
  v_error text;
  v_delay interval;
BEGIN
  SELECT * INTO t FROM {{.Outbox}} WHERE id = p_id FOR UPDATE;
  IF NOT FOUND OR t.state <> 'sending' OR t.attempts <> p_attempt THEN
    RETURN QUERY SELECT p_id, t.operation_key, coalesce(t.state, 'missing'), false;
    RETURN;
  END IF;
  v_error := left(coalesce(nullif(p_error, ''), p_body), 2000);
  v_delay := least(p_backoff * power(2, least(t.attempts - 1, 20)), interval '1 hour') * (0.5 + random() / 2);
  IF p_phase = 'lookup' THEN
    IF p_status BETWEEN 200 AND 299 THEN
      v_state := 'sent';
    ELSIF p_status = 404 THEN
      -- Not performed: send it again, with the same key, now.
      UPDATE {{.Outbox}} SET state = 'pending', last_status = p_status, last_error = 'lookup: not performed; resending',
        claimed_until = NULL, next_attempt_at = now(), updated_at = now()
      WHERE id = t.id;
      RETURN QUERY SELECT t.id, t.operation_key, 'pending'::text, true;
      RETURN;
    ELSE
      v_state := 'ambiguous';
      v_error := 'lookup did not answer 200 or 404: ' || coalesce(p_status::text, v_error, 'no answer');
    END IF;
  ELSIF p_status BETWEEN 200 AND 299 THEN
    v_state := 'sent';
  ELSIF p_status IN (408, 409, 429) OR p_status >= 500 THEN
    v_state := CASE WHEN t.attempts >= p_max_attempts THEN 'failed' ELSE 'pending' END;
  ELSIF p_status IS NOT NULL THEN
    v_state := 'failed';
  ELSIF p_error IN ('ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ENETUNREACH', 'EHOSTUNREACH') THEN
    v_state := CASE WHEN t.attempts >= p_max_attempts THEN 'failed' ELSE 'pending' END;
  ELSE
    v_state := 'ambiguous';
  END IF;
  UPDATE {{.Outbox}} SET
    state = v_state,
    last_status = p_status,
    last_error = CASE WHEN v_state = 'sent' THEN NULL ELSE v_error END,
    claimed_until = NULL,
    next_attempt_at = CASE WHEN v_state IN ('pending', 'ambiguous') THEN now() + v_delay ELSE next_attempt_at END,
    sent_at = CASE WHEN v_state = 'sent' THEN now() END,
    updated_at = now()
  WHERE id = t.id;
  RETURN QUERY SELECT t.id, t.operation_key, v_state, false;
END
$fn$;

-- {{.OutboxWait}} lets one dispatcher wait for the next task that falls due
-- within p_window, so that a retry happens at its backoff and not at the
-- next sweep. It returns true once a task is due (pending, ambiguous, or
-- sending with an expired claim), false when none will be within the
-- window, or at once when another dispatcher is already waiting: the
-- transaction-scoped advisory lock (keyed by the outbox table) makes at most
-- one waiter per table, and it goes with the waiter's transaction, so a
-- dispatcher that dies while waiting leaves no lock behind. It reads the
-- clock, not the transaction's start, and looks again every second so that
-- a task scheduled earlier meanwhile is not missed.
CREATE OR REPLACE FUNCTION {{.OutboxWait}}(p_window interval)
RETURNS TABLE (due boolean)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_until timestamptz := clock_timestamp() + p_window;
  v_next timestamptz;
BEGIN
  IF NOT pg_try_advisory_xact_lock('{{.Outbox}}'::regclass::oid::bigint) THEN
    RETURN QUERY SELECT false;
    RETURN;
  END IF;
  LOOP
    SELECT min(CASE WHEN t.state = 'sending' THEN t.claimed_until ELSE t.next_attempt_at END) INTO v_next
    FROM {{.Outbox}} t WHERE t.state IN ('pending', 'ambiguous', 'sending');
    IF v_next IS NULL OR v_next > v_until THEN
      RETURN QUERY SELECT false;
      RETURN;
    END IF;
    IF v_next <= clock_timestamp() THEN
      RETURN QUERY SELECT true;
      RETURN;
    END IF;
    PERFORM pg_sleep(least(extract(epoch FROM v_next - clock_timestamp()), 1));
  END LOOP;
END
$fn$;
