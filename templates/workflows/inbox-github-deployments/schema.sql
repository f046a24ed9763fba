-- idemhook schema (pattern: inbox, rules: "preset github-deployments"). Safe to run more than once.
-- Inbox pattern: receipt is not effect.
--   inbox_events  one row per received event, unique per (account, event_id);
--                 the receiver saves it before it answers 200.
--   effects       one row per business effect, unique per effect_key, written
--                 in the same transaction as the business change.
--   the entity tables  the rows effects change: a preset's example domain
--                 (created here), or your own tables (docs/inbox.md).
--   outbox_tasks  external calls saved with the effect and delivered later,
--                 each with a stable operation_key.
-- Safe to run more than once: it creates what is missing and replaces only
-- the functions idemhook owns.


CREATE TABLE IF NOT EXISTS inbox_events (
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
ALTER TABLE inbox_events ADD COLUMN IF NOT EXISTS waiting_for text;
-- The recoverer's query: unfinished work only.
CREATE INDEX IF NOT EXISTS inbox_events_unfinished_idx ON inbox_events (state, next_attempt_at)
  WHERE state IN ('received', 'processing', 'deferred');
CREATE INDEX IF NOT EXISTS inbox_events_waiting_idx ON inbox_events (account, waiting_for)
  WHERE state = 'deferred';



CREATE TABLE IF NOT EXISTS effects (
  effect_key text PRIMARY KEY,
  inbox_id bigint REFERENCES inbox_events (id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);


-- Example domain (rules preset github-deployments): a GitHub deployment
-- that an outside service performs, from its creation to its final status
-- and its retirement. One row per App installation (account) and
-- deployment.
CREATE TABLE IF NOT EXISTS deployments (
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

CREATE TABLE IF NOT EXISTS outbox_tasks (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  -- Stable across every retry; sent as the Idempotency-Key header.
  operation_key text NOT NULL UNIQUE,
  kind text NOT NULL,
  payload jsonb NOT NULL,
  inbox_id bigint REFERENCES inbox_events (id) ON DELETE SET NULL,
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
CREATE INDEX IF NOT EXISTS outbox_tasks_due_idx ON outbox_tasks (next_attempt_at)
  WHERE state IN ('pending', 'sending', 'ambiguous');

-- inbox_drainer says whether a worker is draining the received rows now (its
-- lease, draining_until) and whether a receipt came in since the drainer
-- last looked (pending). The n8n receiver sets pending with every new
-- receipt, in the receipt's own transaction, and starts a worker only when
-- no lease is live (it then takes the lease for that worker, so concurrent
-- receipts start one worker, not one each). A drainer stops only by the
-- statement that finds pending false under the row lock; a receipt whose
-- transaction commits after that statement finds no live lease and starts
-- a worker. So a receipt is never left waiting for a drainer that stopped.
CREATE TABLE IF NOT EXISTS inbox_drainer (
  lane integer PRIMARY KEY DEFAULT 0 CHECK (lane = 0),
  draining_until timestamptz,
  pending boolean NOT NULL DEFAULT false,
  -- The transaction that last took the lease for a worker it starts.
  woken_by xid8,
  -- The same for the outbox dispatcher a worker wakes: its lease, the
  -- tasks written since it last looked, and who last woke one.
  dispatching_until timestamptz,
  outbox_pending boolean NOT NULL DEFAULT false,
  outbox_woken_by xid8
);
-- When the draining worker last claimed (see idemhook_drain_next's p_pace).
ALTER TABLE inbox_drainer ADD COLUMN IF NOT EXISTS drained_at timestamptz;
INSERT INTO inbox_drainer (lane) VALUES (0) ON CONFLICT (lane) DO NOTHING;

DO $check$
DECLARE
  v_missing text;
BEGIN
  SELECT string_agg(DISTINCT c.tbl, ', ') INTO v_missing
  FROM (VALUES ('deployments', 'id'), ('deployments', 'account'), ('deployments', 'state'), ('deployments', 'updated_at'), ('deployments', 'repository'), ('deployments', 'environment'), ('deployments', 'ref'), ('deployments', 'sha'), ('deployments', 'final_status')) c(tbl, col) WHERE to_regclass(c.tbl) IS NULL;
  IF v_missing IS NOT NULL THEN
    RAISE EXCEPTION 'the effect rules name tables that do not exist: %', v_missing
      USING HINT = 'create them before this schema, or use a preset whose schema creates its tables';
  END IF;
  SELECT string_agg(c.tbl || '.' || c.col, ', ') INTO v_missing
  FROM (VALUES ('deployments', 'id'), ('deployments', 'account'), ('deployments', 'state'), ('deployments', 'updated_at'), ('deployments', 'repository'), ('deployments', 'environment'), ('deployments', 'ref'), ('deployments', 'sha'), ('deployments', 'final_status')) c(tbl, col)
  WHERE NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = to_regclass(c.tbl) AND a.attname = c.col AND NOT a.attisdropped AND a.attnum > 0);
  IF v_missing IS NOT NULL THEN
    RAISE EXCEPTION 'the effect rules name columns that do not exist: %', v_missing;
  END IF;
END
$check$;
-- idemhook_apply_event decides what one claimed inbox row does to the business,
-- in one transaction (the function call is one statement). Its decision
-- block is compiled from the effect rules (package rules, docs/inbox.md):
--   a type outside p_allowed                 -> ignored, nothing written
--   missing or inconsistent required data    -> rejected, the reason in last_error
--   a transition not allowed yet             -> deferred, retried after p_backoff
--                                               doubled per attempt (at most
--                                               15 minutes), or at once when the
--                                               effect it waits for happens;
--                                               failed once older than p_defer_limit
--   an effect already recorded               -> processed, outcome effect_exists
--   otherwise: the effect key, the row's change, the outbox tasks and the
--   inbox row's final state are written together, or none of them.
-- An error inside the decision (a trigger, a constraint, a deadlock, a
-- cancelled statement) rolls back what the decision wrote, and only that: the row stays processing with
-- the database's message in last_error and is retried after the same backoff
-- (ClaimEvent fails it after its attempts). The error is caught here, in the
-- row's own subtransaction, so that a caller running several rows in one
-- transaction loses none of the others.
-- p_attempt fences the call: a worker whose claim was taken over (its lease
-- expired) changes nothing. The entity row is locked first, so two events
-- proposing the same effect are serialised; the second then finds the effect
-- (each statement of a plpgsql function reads the latest committed data).
DROP FUNCTION IF EXISTS idemhook_apply_event(bigint, integer, text[], interval);
CREATE OR REPLACE FUNCTION idemhook_apply_event(p_inbox_id bigint, p_attempt integer, p_allowed text[], p_defer_limit interval,
  p_backoff interval)
RETURNS TABLE (inbox_id bigint, state text, outcome text, detail text, tasks integer)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
  ev inbox_events%ROWTYPE;
  v_state text;
  v_outcome text;
  v_detail text;
  v_waiting text;
  v_tasks integer := 0;
  doc jsonb;
  v_type text;
  v_id text;
  v_effect text;
  v_task_keys text[];
  v_found boolean;
  v_n integer;
  v_defer_limit interval;
  f__id jsonb;
  f_description jsonb;
  f_environment jsonb;
  f_ref jsonb;
  f_repository jsonb;
  f_sha jsonb;
  f_status jsonb;
  f_target_url jsonb;
  e_deployment deployments%ROWTYPE;
  k_deployment deployments.id%TYPE;
  a_deployment deployments.account%TYPE;
  v_backoff interval;
  v_sqlstate text;
BEGIN
  SELECT * INTO ev FROM inbox_events WHERE id = p_inbox_id FOR UPDATE;
  IF NOT FOUND OR ev.state <> 'processing' OR ev.attempts <> p_attempt THEN
    RETURN QUERY SELECT p_inbox_id, coalesce(ev.state, 'missing'), 'not_claimed'::text,
      'this attempt does not hold the event (finished, or taken over after its claim expired)'::text, 0;
    RETURN;
  END IF;
  v_backoff := least(p_backoff * power(2, least(ev.attempts - 1, 20)), interval '15 minutes');

  BEGIN
    <<decide>>
    BEGIN
      v_type := coalesce(ev.headers ->> 'x-github-event', '');
      IF NOT (v_type = ANY (p_allowed)) THEN
        v_state := 'ignored'; v_outcome := 'type_not_allowed';
        v_detail := format('event type %L is not in the allowlist', v_type);
        EXIT decide;
      END IF;
      BEGIN
        doc := convert_from(ev.body, 'UTF8')::jsonb;
      EXCEPTION WHEN others THEN
        doc := NULL;
      END;

      -- rule start_deployment
      IF v_type = ANY (ARRAY['deployment']::text[])
        AND coalesce((doc #> ARRAY['action']::text[]) = ANY (ARRAY['"created"'::jsonb]), false) THEN
        v_defer_limit := NULL;
        f__id := doc #> ARRAY['deployment', 'id']::text[];
        f_repository := doc #> ARRAY['repository', 'full_name']::text[];
        f_environment := doc #> ARRAY['deployment', 'environment']::text[];
        f_ref := doc #> ARRAY['deployment', 'ref']::text[];
        f_sha := doc #> ARRAY['deployment', 'sha']::text[];
        IF NOT (coalesce((doc #> ARRAY['deployment', 'id']::text[]) #>> '{}', '') <> '') THEN
          v_state := 'rejected'; v_outcome := 'missing_deployment_id';
          v_detail := format('%s: %s (got %s)', 'missing_deployment_id', 'deployment.id must be present', coalesce(left((doc #> ARRAY['deployment', 'id']::text[])::text, 200), 'nothing'));
          EXIT decide;
        END IF;
        IF NOT (coalesce(f_repository #>> '{}', '') <> '') THEN
          v_state := 'rejected'; v_outcome := 'missing_repository';
          v_detail := format('%s: %s (got %s)', 'missing_repository', 'repository.full_name must be present', coalesce(left(f_repository::text, 200), 'nothing'));
          EXIT decide;
        END IF;
        IF NOT (coalesce(f_environment #>> '{}', '') <> '') THEN
          v_state := 'rejected'; v_outcome := 'missing_environment';
          v_detail := format('%s: %s (got %s)', 'missing_environment', 'deployment.environment must be present', coalesce(left(f_environment::text, 200), 'nothing'));
          EXIT decide;
        END IF;
        IF NOT (coalesce(f_sha #>> '{}', '') <> '') THEN
          v_state := 'rejected'; v_outcome := 'missing_sha';
          v_detail := format('%s: %s (got %s)', 'missing_sha', 'deployment.sha must be present', coalesce(left(f_sha::text, 200), 'nothing'));
          EXIT decide;
        END IF;
        v_id := f__id #>> '{}';
        IF coalesce(v_id, '') = '' THEN
          v_state := 'rejected'; v_outcome := 'missing_deployment_id';
          v_detail := format('the deployment id is missing');
          EXIT decide;
        END IF;
        v_effect := 'start_deployment:' || v_id;
        v_task_keys := ARRAY['deploy_job:' || v_id]::text[];
        IF octet_length(v_id) > 1000 OR octet_length(v_effect) > 1000
          OR EXISTS (SELECT 1 FROM unnest(v_task_keys) k WHERE octet_length(k) > 1000) THEN
          v_state := 'rejected'; v_outcome := 'key_too_long';
          v_detail := format('the deployment id, the effect key or an operation key is longer than 1000 bytes');
          EXIT decide;
        END IF;
        k_deployment := v_id;
        a_deployment := ev.account;
        PERFORM pg_advisory_xact_lock(hashtextextended('deployments' || ':' || ev.account || ':' || v_id, 0));
        SELECT * INTO e_deployment FROM deployments WHERE id = k_deployment AND account = a_deployment FOR UPDATE;
        v_found := FOUND;
        IF EXISTS (SELECT 1 FROM effects WHERE effect_key = v_effect) THEN
          v_state := 'processed'; v_outcome := 'effect_exists';
          v_detail := format('effect %s was recorded by an earlier event', v_effect);
          EXIT decide;
        END IF;
        IF v_found THEN
          IF e_deployment.state::text = ANY (ARRAY[]::text[]) THEN
            NULL;
          ELSE
            v_state := 'rejected'; v_outcome := 'deployment_exists';
            v_detail := format('deployment %s is %s: no transition from it', v_id, e_deployment.state::text);
            EXIT decide;
          END IF;
        END IF;
        INSERT INTO effects (effect_key, inbox_id) VALUES (v_effect, ev.id) ON CONFLICT DO NOTHING;
        IF NOT FOUND THEN
          v_state := 'processed'; v_outcome := 'effect_exists';
          v_detail := format('effect %s was recorded concurrently', v_effect);
          EXIT decide;
        END IF;
        IF NOT v_found THEN
          INSERT INTO deployments (id, account, state, repository, environment, ref, sha, updated_at)
          VALUES (k_deployment, a_deployment, 'pending', (jsonb_populate_record(NULL::deployments, jsonb_build_object('repository', f_repository))).repository, (jsonb_populate_record(NULL::deployments, jsonb_build_object('environment', f_environment))).environment, (jsonb_populate_record(NULL::deployments, jsonb_build_object('ref', f_ref))).ref, (jsonb_populate_record(NULL::deployments, jsonb_build_object('sha', f_sha))).sha, now())
          RETURNING * INTO e_deployment;
        ELSE
          UPDATE deployments SET state = 'pending', repository = (jsonb_populate_record(NULL::deployments, jsonb_build_object('repository', f_repository))).repository, environment = (jsonb_populate_record(NULL::deployments, jsonb_build_object('environment', f_environment))).environment, ref = (jsonb_populate_record(NULL::deployments, jsonb_build_object('ref', f_ref))).ref, sha = (jsonb_populate_record(NULL::deployments, jsonb_build_object('sha', f_sha))).sha, updated_at = now()
          WHERE id = k_deployment AND account = a_deployment RETURNING * INTO e_deployment;
        END IF;
        INSERT INTO outbox_tasks (operation_key, kind, payload, inbox_id)
        VALUES (v_task_keys[1], 'deploy_job', jsonb_build_object('kind', 'deploy_job', 'deployment', v_id, 'repository', to_jsonb(e_deployment.repository), 'environment', to_jsonb(e_deployment.environment), 'sha', to_jsonb(e_deployment.sha)), ev.id)
        ON CONFLICT (operation_key) DO NOTHING;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_tasks := v_tasks + v_n;
        UPDATE inbox_events SET next_attempt_at = now()
        WHERE state = 'deferred' AND account = ev.account AND waiting_for = v_id AND next_attempt_at > now();
        v_state := 'processed'; v_outcome := 'applied'; v_detail := v_effect;
        EXIT decide;
      END IF;

      -- rule deployment_succeeded
      IF v_type = ANY (ARRAY['deployment_status']::text[])
        AND coalesce((doc #> ARRAY['deployment_status', 'state']::text[]) = ANY (ARRAY['"success"'::jsonb]), false) THEN
        v_defer_limit := NULL;
        f__id := doc #> ARRAY['deployment', 'id']::text[];
        f_status := doc #> ARRAY['deployment_status', 'state']::text[];
        f_target_url := coalesce(doc #> ARRAY['deployment_status', 'environment_url']::text[], doc #> ARRAY['deployment_status', 'target_url']::text[]);
        IF NOT (coalesce((doc #> ARRAY['deployment', 'id']::text[]) #>> '{}', '') <> '') THEN
          v_state := 'rejected'; v_outcome := 'missing_deployment_id';
          v_detail := format('%s: %s (got %s)', 'missing_deployment_id', 'deployment.id must be present', coalesce(left((doc #> ARRAY['deployment', 'id']::text[])::text, 200), 'nothing'));
          EXIT decide;
        END IF;
        v_id := f__id #>> '{}';
        IF coalesce(v_id, '') = '' THEN
          v_state := 'rejected'; v_outcome := 'missing_deployment_id';
          v_detail := format('the deployment id is missing');
          EXIT decide;
        END IF;
        v_effect := 'settle_deployment:' || v_id;
        v_task_keys := ARRAY['deploy_announcement:' || v_id]::text[];
        IF octet_length(v_id) > 1000 OR octet_length(v_effect) > 1000
          OR EXISTS (SELECT 1 FROM unnest(v_task_keys) k WHERE octet_length(k) > 1000) THEN
          v_state := 'rejected'; v_outcome := 'key_too_long';
          v_detail := format('the deployment id, the effect key or an operation key is longer than 1000 bytes');
          EXIT decide;
        END IF;
        k_deployment := v_id;
        a_deployment := ev.account;
        SELECT * INTO e_deployment FROM deployments WHERE id = k_deployment AND account = a_deployment FOR UPDATE;
        v_found := FOUND;
        IF NOT v_found THEN
          v_waiting := v_id;
          v_state := 'deferred'; v_outcome := 'deployment_unknown';
          v_detail := format('no deployment %L for account %L yet', v_id, ev.account);
          EXIT decide;
        END IF;
        IF EXISTS (SELECT 1 FROM effects WHERE effect_key = v_effect) THEN
          v_state := 'processed'; v_outcome := 'effect_exists';
          v_detail := format('effect %s was recorded by an earlier event', v_effect);
          EXIT decide;
        END IF;
        IF v_found THEN
          IF e_deployment.state::text = ANY (ARRAY['pending']::text[]) THEN
            NULL;
          ELSE
            v_state := 'rejected'; v_outcome := 'deployment_settled';
            v_detail := format('deployment %s is %s: no transition from it', v_id, e_deployment.state::text);
            EXIT decide;
          END IF;
        END IF;
        INSERT INTO effects (effect_key, inbox_id) VALUES (v_effect, ev.id) ON CONFLICT DO NOTHING;
        IF NOT FOUND THEN
          v_state := 'processed'; v_outcome := 'effect_exists';
          v_detail := format('effect %s was recorded concurrently', v_effect);
          EXIT decide;
        END IF;
          UPDATE deployments SET state = 'succeeded', final_status = (jsonb_populate_record(NULL::deployments, jsonb_build_object('final_status', f_status))).final_status, updated_at = now()
          WHERE id = k_deployment AND account = a_deployment RETURNING * INTO e_deployment;
        INSERT INTO outbox_tasks (operation_key, kind, payload, inbox_id)
        VALUES (v_task_keys[1], 'deploy_announcement', jsonb_build_object('kind', 'deploy_announcement', 'deployment', v_id, 'repository', to_jsonb(e_deployment.repository), 'environment', to_jsonb(e_deployment.environment), 'result', 'success', 'url', f_target_url), ev.id)
        ON CONFLICT (operation_key) DO NOTHING;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_tasks := v_tasks + v_n;
        UPDATE inbox_events SET next_attempt_at = now()
        WHERE state = 'deferred' AND account = ev.account AND waiting_for = v_id AND next_attempt_at > now();
        v_state := 'processed'; v_outcome := 'applied'; v_detail := v_effect;
        EXIT decide;
      END IF;

      -- rule deployment_failed
      IF v_type = ANY (ARRAY['deployment_status']::text[])
        AND coalesce((doc #> ARRAY['deployment_status', 'state']::text[]) = ANY (ARRAY['"failure"'::jsonb, '"error"'::jsonb]), false) THEN
        v_defer_limit := NULL;
        f__id := doc #> ARRAY['deployment', 'id']::text[];
        f_status := doc #> ARRAY['deployment_status', 'state']::text[];
        f_description := doc #> ARRAY['deployment_status', 'description']::text[];
        IF NOT (coalesce((doc #> ARRAY['deployment', 'id']::text[]) #>> '{}', '') <> '') THEN
          v_state := 'rejected'; v_outcome := 'missing_deployment_id';
          v_detail := format('%s: %s (got %s)', 'missing_deployment_id', 'deployment.id must be present', coalesce(left((doc #> ARRAY['deployment', 'id']::text[])::text, 200), 'nothing'));
          EXIT decide;
        END IF;
        v_id := f__id #>> '{}';
        IF coalesce(v_id, '') = '' THEN
          v_state := 'rejected'; v_outcome := 'missing_deployment_id';
          v_detail := format('the deployment id is missing');
          EXIT decide;
        END IF;
        v_effect := 'settle_deployment:' || v_id;
        v_task_keys := ARRAY['deploy_announcement:' || v_id]::text[];
        IF octet_length(v_id) > 1000 OR octet_length(v_effect) > 1000
          OR EXISTS (SELECT 1 FROM unnest(v_task_keys) k WHERE octet_length(k) > 1000) THEN
          v_state := 'rejected'; v_outcome := 'key_too_long';
          v_detail := format('the deployment id, the effect key or an operation key is longer than 1000 bytes');
          EXIT decide;
        END IF;
        k_deployment := v_id;
        a_deployment := ev.account;
        SELECT * INTO e_deployment FROM deployments WHERE id = k_deployment AND account = a_deployment FOR UPDATE;
        v_found := FOUND;
        IF NOT v_found THEN
          v_waiting := v_id;
          v_state := 'deferred'; v_outcome := 'deployment_unknown';
          v_detail := format('no deployment %L for account %L yet', v_id, ev.account);
          EXIT decide;
        END IF;
        IF EXISTS (SELECT 1 FROM effects WHERE effect_key = v_effect) THEN
          v_state := 'processed'; v_outcome := 'effect_exists';
          v_detail := format('effect %s was recorded by an earlier event', v_effect);
          EXIT decide;
        END IF;
        IF v_found THEN
          IF e_deployment.state::text = ANY (ARRAY['pending']::text[]) THEN
            NULL;
          ELSE
            v_state := 'rejected'; v_outcome := 'deployment_settled';
            v_detail := format('deployment %s is %s: no transition from it', v_id, e_deployment.state::text);
            EXIT decide;
          END IF;
        END IF;
        INSERT INTO effects (effect_key, inbox_id) VALUES (v_effect, ev.id) ON CONFLICT DO NOTHING;
        IF NOT FOUND THEN
          v_state := 'processed'; v_outcome := 'effect_exists';
          v_detail := format('effect %s was recorded concurrently', v_effect);
          EXIT decide;
        END IF;
          UPDATE deployments SET state = 'failed', final_status = (jsonb_populate_record(NULL::deployments, jsonb_build_object('final_status', f_status))).final_status, updated_at = now()
          WHERE id = k_deployment AND account = a_deployment RETURNING * INTO e_deployment;
        INSERT INTO outbox_tasks (operation_key, kind, payload, inbox_id)
        VALUES (v_task_keys[1], 'deploy_announcement', jsonb_build_object('kind', 'deploy_announcement', 'deployment', v_id, 'repository', to_jsonb(e_deployment.repository), 'environment', to_jsonb(e_deployment.environment), 'result', coalesce(f_status #>> '{}', ''), 'description', f_description), ev.id)
        ON CONFLICT (operation_key) DO NOTHING;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_tasks := v_tasks + v_n;
        UPDATE inbox_events SET next_attempt_at = now()
        WHERE state = 'deferred' AND account = ev.account AND waiting_for = v_id AND next_attempt_at > now();
        v_state := 'processed'; v_outcome := 'applied'; v_detail := v_effect;
        EXIT decide;
      END IF;

      -- rule retire_deployment
      IF v_type = ANY (ARRAY['deployment_status']::text[])
        AND coalesce((doc #> ARRAY['deployment_status', 'state']::text[]) = ANY (ARRAY['"inactive"'::jsonb]), false) THEN
        v_defer_limit := NULL;
        f__id := doc #> ARRAY['deployment', 'id']::text[];
        IF NOT (coalesce((doc #> ARRAY['deployment', 'id']::text[]) #>> '{}', '') <> '') THEN
          v_state := 'rejected'; v_outcome := 'missing_deployment_id';
          v_detail := format('%s: %s (got %s)', 'missing_deployment_id', 'deployment.id must be present', coalesce(left((doc #> ARRAY['deployment', 'id']::text[])::text, 200), 'nothing'));
          EXIT decide;
        END IF;
        v_id := f__id #>> '{}';
        IF coalesce(v_id, '') = '' THEN
          v_state := 'rejected'; v_outcome := 'missing_deployment_id';
          v_detail := format('the deployment id is missing');
          EXIT decide;
        END IF;
        v_effect := 'retire_deployment:' || v_id;
        v_task_keys := ARRAY[]::text[];
        IF octet_length(v_id) > 1000 OR octet_length(v_effect) > 1000
          OR EXISTS (SELECT 1 FROM unnest(v_task_keys) k WHERE octet_length(k) > 1000) THEN
          v_state := 'rejected'; v_outcome := 'key_too_long';
          v_detail := format('the deployment id, the effect key or an operation key is longer than 1000 bytes');
          EXIT decide;
        END IF;
        k_deployment := v_id;
        a_deployment := ev.account;
        SELECT * INTO e_deployment FROM deployments WHERE id = k_deployment AND account = a_deployment FOR UPDATE;
        v_found := FOUND;
        IF NOT v_found THEN
          v_waiting := v_id;
          v_state := 'deferred'; v_outcome := 'deployment_unknown';
          v_detail := format('no deployment %L for account %L yet', v_id, ev.account);
          EXIT decide;
        END IF;
        IF EXISTS (SELECT 1 FROM effects WHERE effect_key = v_effect) THEN
          v_state := 'processed'; v_outcome := 'effect_exists';
          v_detail := format('effect %s was recorded by an earlier event', v_effect);
          EXIT decide;
        END IF;
        IF v_found THEN
          IF e_deployment.state::text = ANY (ARRAY['succeeded']::text[]) THEN
            NULL;
          ELSIF e_deployment.state::text = 'pending' THEN
            v_waiting := v_id;
            v_state := 'deferred'; v_outcome := 'deployment_not_settled';
            v_detail := format('deployment %s is %s: the event waits for its transition', v_id, e_deployment.state::text);
            EXIT decide;
          ELSE
            v_state := 'rejected'; v_outcome := 'deployment_failed';
            v_detail := format('deployment %s is %s: no transition from it', v_id, e_deployment.state::text);
            EXIT decide;
          END IF;
        END IF;
        INSERT INTO effects (effect_key, inbox_id) VALUES (v_effect, ev.id) ON CONFLICT DO NOTHING;
        IF NOT FOUND THEN
          v_state := 'processed'; v_outcome := 'effect_exists';
          v_detail := format('effect %s was recorded concurrently', v_effect);
          EXIT decide;
        END IF;
          UPDATE deployments SET state = 'inactive', updated_at = now()
          WHERE id = k_deployment AND account = a_deployment RETURNING * INTO e_deployment;
        UPDATE inbox_events SET next_attempt_at = now()
        WHERE state = 'deferred' AND account = ev.account AND waiting_for = v_id AND next_attempt_at > now();
        v_state := 'processed'; v_outcome := 'applied'; v_detail := v_effect;
        EXIT decide;
      END IF;

      IF v_type = ANY (ARRAY['deployment', 'deployment_status']::text[]) THEN
        v_state := 'ignored'; v_outcome := 'no_matching_rule';
        v_detail := format('no rule for event type %L applies to this event''s data', v_type);
        EXIT decide;
      END IF;
      v_state := 'rejected'; v_outcome := 'no_rule';
      v_detail := format('event type %L is allowed but idemhook_apply_event has no rule for it', v_type);
      EXIT decide;
    END decide;

    IF v_state = 'deferred' AND now() - ev.received_at > coalesce(v_defer_limit, p_defer_limit) THEN
      v_state := 'failed';
      v_detail := format('%s; gave up: deferred for longer than %s', v_detail, coalesce(v_defer_limit, p_defer_limit));
    END IF;
    UPDATE inbox_events SET
      state = v_state,
      outcome = v_outcome,
      last_error = CASE WHEN v_state = 'processed' THEN NULL ELSE v_detail END,
      claimed_until = NULL,
      next_attempt_at = CASE WHEN v_state = 'deferred' THEN now() + v_backoff END,
      waiting_for = CASE WHEN v_state = 'deferred' THEN v_waiting END,
      finished_at = CASE WHEN v_state <> 'deferred' THEN now() END,
      updated_at = now()
    WHERE id = ev.id;
  EXCEPTION WHEN others OR query_canceled THEN
    -- Everything this block wrote is rolled back; the row lock is kept. A
    -- cancelled statement (statement_timeout, an operator's
    -- pg_cancel_backend) is recorded too: it is one row's transient fault,
    -- and n8n keeps no message for it (see RecordBatch).
    GET STACKED DIAGNOSTICS v_detail = MESSAGE_TEXT, v_sqlstate = RETURNED_SQLSTATE;
    v_state := 'processing'; v_outcome := 'error'; v_tasks := 0;
    v_detail := format('the decision failed: %s (SQLSTATE %s); retried after %s', v_detail, v_sqlstate, v_backoff);
    UPDATE inbox_events SET outcome = v_outcome, last_error = left(v_detail, 2000),
      claimed_until = now() + v_backoff, updated_at = now()
    WHERE id = ev.id;
  END;
  RETURN QUERY SELECT ev.id, v_state, v_outcome, v_detail, v_tasks;
END
$fn$;

-- idemhook_apply_batch decides a worker's claimed rows (p_ids and p_attempts,
-- comma-separated, pairwise) one after the other with idemhook_apply_event,
-- and commits after each: every row is decided in a transaction of its own,
-- as if each were a statement of its own, but the batch costs its caller one
-- round trip and n8n one expression. A row's error is caught by its decision
-- and kept on its row; an error that ends the call (the connection lost)
-- leaves the rows decided before it committed and the others processing,
-- for the caller to record. It is a procedure, so that it may commit: CALL
-- it outside a transaction block. tasks is the number of outbox tasks the
-- batch wrote.
CREATE OR REPLACE PROCEDURE idemhook_apply_batch(p_ids text, p_attempts text, p_allowed text[], p_defer_limit interval,
  p_backoff interval, INOUT tasks integer DEFAULT 0)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_ids bigint[] := string_to_array(p_ids, ',')::bigint[];
  v_attempts integer[] := string_to_array(p_attempts, ',')::integer[];
  v_tasks integer;
BEGIN
  IF cardinality(v_ids) <> cardinality(v_attempts) THEN
    RAISE EXCEPTION '% ids and % attempts: each claimed row needs its attempt', cardinality(v_ids), cardinality(v_attempts);
  END IF;
  tasks := 0;
  FOR i IN 1 .. cardinality(v_ids) LOOP
    SELECT a.tasks INTO v_tasks FROM idemhook_apply_event(v_ids[i], v_attempts[i], p_allowed, p_defer_limit, p_backoff) a;
    tasks := tasks + coalesce(v_tasks, 0);
    COMMIT;
  END LOOP;
END
$fn$;

-- idemhook_cleanup deletes sent tasks, then finished events with no task
-- still to send, first finished longer ago than p_retention, p_batch rows in
-- each transaction (it commits between batches, and rests CleanupPause
-- seconds): a day of old work is many short transactions, never one long one
-- holding its locks and its WAL, and never a burst of WAL that the work
-- committing beside it waits behind.
-- Deleted by id, chosen in id order without locks; a row that changed
-- meanwhile is matched again on delete and kept.
CREATE OR REPLACE PROCEDURE idemhook_cleanup(p_retention interval, p_batch integer,
  INOUT tasks_deleted bigint DEFAULT 0, INOUT events_deleted bigint DEFAULT 0)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_n bigint;
BEGIN
  tasks_deleted := 0;
  events_deleted := 0;
  LOOP
    DELETE FROM outbox_tasks WHERE id = ANY (ARRAY(
      SELECT id FROM outbox_tasks WHERE state = 'sent' AND sent_at < now() - p_retention ORDER BY id LIMIT p_batch))
      AND state = 'sent' AND sent_at < now() - p_retention;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    tasks_deleted := tasks_deleted + v_n;
    COMMIT;
    EXIT WHEN v_n < p_batch;
    PERFORM pg_sleep(0.01);
  END LOOP;
  LOOP
    DELETE FROM inbox_events e WHERE e.id = ANY (ARRAY(
      SELECT i.id FROM inbox_events i
      WHERE i.state IN ('processed', 'ignored', 'rejected', 'forwarded') AND i.finished_at < now() - p_retention
        AND NOT EXISTS (SELECT 1 FROM outbox_tasks o WHERE o.inbox_id = i.id AND o.state <> 'sent')
      ORDER BY i.id LIMIT p_batch))
      AND e.state IN ('processed', 'ignored', 'rejected', 'forwarded') AND e.finished_at < now() - p_retention;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    events_deleted := events_deleted + v_n;
    COMMIT;
    EXIT WHEN v_n < p_batch;
    PERFORM pg_sleep(0.01);
  END LOOP;
END
$fn$;

-- idemhook_outbox_result records the answer to one outbox call (a send, or the
-- lookup that reconciles an uncertain one) and decides the task's next state:
--   send:   2xx -> sent; 408, 409, 429, 5xx -> pending with backoff (failed
--           after p_max_attempts); other statuses -> failed, the answer kept;
--           no connection (refused, unknown host) -> pending with backoff;
--           any other transport error (timeout, reset) -> ambiguous: the call
--           may have been performed, so it is looked up before any resend.
--   lookup: 2xx -> sent; 404 -> pending and due now, so the dispatcher's
--           send phase resends it with the same key; anything else -> stays
--           ambiguous, looked up again later.
-- p_attempt fences the call as in idemhook_apply_event.
CREATE OR REPLACE FUNCTION idemhook_outbox_result(p_id bigint, p_attempt integer, p_phase text, p_status integer,
  p_error text, p_body text, p_max_attempts integer, p_backoff interval)
RETURNS TABLE (id bigint, operation_key text, state text, resend boolean)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
  t outbox_tasks%ROWTYPE;
  v_state text;
  v_error text;
  v_delay interval;
BEGIN
  SELECT * INTO t FROM outbox_tasks WHERE id = p_id FOR UPDATE;
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
      UPDATE outbox_tasks SET state = 'pending', last_status = p_status, last_error = 'lookup: not performed; resending',
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
  UPDATE outbox_tasks SET
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

-- idemhook_outbox_wait lets one dispatcher wait for the next task that falls due
-- within p_window, so that a retry happens at its backoff and not at the
-- next sweep. It returns true once a task is due (pending, ambiguous, or
-- sending with an expired claim), false when none will be within the
-- window, or at once when another dispatcher is already waiting: the
-- transaction-scoped advisory lock (keyed by the outbox table) makes at most
-- one waiter per table, and it goes with the waiter's transaction, so a
-- dispatcher that dies while waiting leaves no lock behind. It reads the
-- clock, not the transaction's start, and looks again every second so that
-- a task scheduled earlier meanwhile is not missed.
--
-- A dispatcher a worker woke (p_linger above 0) also waits p_linger for
-- tasks not written yet, looking every 100 ms, and holds the dispatch lease
-- of inbox_drainer (renewed for p_lease whenever it goes on), so that the
-- workers wake no other: a worker that writes tasks while the lease is live
-- marks them pending instead. It gives the lease up only by the statement
-- that finds nothing pending under the row lock, so a batch's tasks are
-- never left for a dispatcher that stopped. It returns true no sooner than
-- p_pace after it started: the tasks of the batches written meanwhile are
-- sent by one pass, where a pass per batch cost n8n five node executions
-- each, on the thread that answers the provider.
DROP FUNCTION IF EXISTS idemhook_outbox_wait(interval);
DROP FUNCTION IF EXISTS idemhook_outbox_wait(interval, interval, interval);
CREATE OR REPLACE FUNCTION idemhook_outbox_wait(p_window interval, p_linger interval DEFAULT interval '0',
  p_lease interval DEFAULT interval '0', p_pace interval DEFAULT interval '0')
RETURNS TABLE (due boolean)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_until timestamptz := clock_timestamp() + p_window;
  v_linger timestamptz := clock_timestamp() + least(p_linger, p_window);
  v_earliest timestamptz := clock_timestamp() + least(p_pace, p_window);
  v_next timestamptz;
  v_woken boolean := p_linger > interval '0' AND EXISTS (SELECT 1 FROM inbox_drainer d WHERE d.lane = 0);
BEGIN
  IF NOT pg_try_advisory_xact_lock('outbox_tasks'::regclass::oid::bigint) THEN
    RETURN QUERY SELECT false;
    RETURN;
  END IF;
  LOOP
    SELECT min(CASE WHEN t.state = 'sending' THEN t.claimed_until ELSE t.next_attempt_at END) INTO v_next
    FROM outbox_tasks t WHERE t.state IN ('pending', 'ambiguous', 'sending');
    IF v_next <= clock_timestamp() OR (v_woken AND (SELECT d.outbox_pending FROM inbox_drainer d WHERE d.lane = 0)) THEN
      IF clock_timestamp() < v_earliest THEN
        PERFORM pg_sleep(extract(epoch FROM v_earliest - clock_timestamp()));
      END IF;
      IF v_woken THEN
        UPDATE inbox_drainer SET outbox_pending = false, dispatching_until = clock_timestamp() + p_lease WHERE lane = 0;
      END IF;
      RETURN QUERY SELECT true;
      RETURN;
    END IF;
    IF (v_next IS NULL OR v_next > v_until) AND clock_timestamp() >= v_linger THEN
      IF NOT v_woken THEN
        RETURN QUERY SELECT false;
        RETURN;
      END IF;
      UPDATE inbox_drainer SET dispatching_until = NULL WHERE lane = 0 AND NOT outbox_pending;
      IF FOUND THEN
        RETURN QUERY SELECT false;
        RETURN;
      END IF;
      -- Tasks were written since the read above: the next look sees them.
    ELSIF clock_timestamp() < v_linger THEN
      PERFORM pg_sleep(0.1);
    ELSE
      PERFORM pg_sleep(least(extract(epoch FROM v_next - clock_timestamp()), 1));
    END IF;
  END LOOP;
END
$fn$;

-- idemhook_drain_next says whether a draining worker claims again (again) or
-- stops, after a batch (p_full: it claimed as many rows as it may, so more
-- may be waiting) of its p_run-th run. A worker that claimed fewer waits up
-- to p_linger for a receipt (pending), then gives its lease up, under the
-- row lock, only if none came meanwhile. The drainer row is read, not
-- locked, while it waits: receivers never wait for a waiting worker. After
-- p_max_runs runs a worker gives its lease up whatever is left (an n8n
-- execution keeps every run's data until it ends, so none runs for ever):
-- the next receipt starts a worker, and the recoverer offers what is left
-- received past its grace.
--
-- A worker that found receipts pending claims them no sooner than p_pace
-- after its last claim (drained_at, which ClaimBatch sets): under a steady
-- flow one run then decides every receipt of the interval, where claiming
-- at once would decide them one run each, and a run costs n8n a dozen node
-- executions whatever its size. A lone receipt, or a full batch, is
-- claimed at once. The lease stays live while it waits, so receipts mark
-- the drainer pending and wake no other worker.
DROP FUNCTION IF EXISTS idemhook_drain_next(boolean, integer, integer, interval, interval);
CREATE OR REPLACE FUNCTION idemhook_drain_next(p_full boolean, p_run integer, p_max_runs integer, p_linger interval, p_lease interval,
  p_pace interval DEFAULT interval '0')
RETURNS TABLE (again boolean)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_until timestamptz := clock_timestamp() + p_linger;
  v_wait interval;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM inbox_drainer d WHERE d.lane = 0) THEN
    RETURN QUERY SELECT false; -- no drainer row: the receiver starts a worker for every receipt
    RETURN;
  END IF;
  IF p_run + 1 >= p_max_runs THEN
    UPDATE inbox_drainer SET draining_until = NULL WHERE lane = 0;
    RETURN QUERY SELECT false;
    RETURN;
  END IF;
  IF p_full THEN
    UPDATE inbox_drainer SET draining_until = clock_timestamp() + p_lease WHERE lane = 0;
    RETURN QUERY SELECT true;
    RETURN;
  END IF;
  LOOP
    IF (SELECT d.pending FROM inbox_drainer d WHERE d.lane = 0) THEN
      v_wait := (SELECT d.drained_at FROM inbox_drainer d WHERE d.lane = 0) + p_pace - clock_timestamp();
      IF v_wait > interval '0' THEN
        PERFORM pg_sleep(extract(epoch FROM v_wait));
      END IF;
      UPDATE inbox_drainer SET pending = false, draining_until = clock_timestamp() + p_lease WHERE lane = 0;
      RETURN QUERY SELECT true;
      RETURN;
    END IF;
    IF clock_timestamp() >= v_until THEN
      UPDATE inbox_drainer SET draining_until = NULL WHERE lane = 0 AND NOT pending;
      IF FOUND THEN
        RETURN QUERY SELECT false;
        RETURN;
      END IF;
      -- A receipt came in since the read above: the next read sees it.
    ELSE
      PERFORM pg_sleep(0.02);
    END IF;
  END LOOP;
END
$fn$;
