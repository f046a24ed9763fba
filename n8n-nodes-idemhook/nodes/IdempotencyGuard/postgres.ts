import { createHash } from 'crypto';
import { Pool, type PoolConfig } from 'pg';

import { GuardError } from './errors';
import { identifierPattern, reservedWords, statements } from './generated';

/** The fields of n8n's built-in Postgres credential that the node reads. */
export interface PostgresCredential {
	host: string;
	port: number;
	database: string;
	user: string;
	password?: string;
	ssl?: 'disable' | 'allow' | 'require' | 'verify' | 'verify-full';
	allowUnauthorizedCerts?: boolean;
	maxConnections?: number;
	sshTunnel?: boolean;
}

/** A reservation's or a lease's result for one key. */
export interface Decision {
	status: 'new' | 'duplicate' | 'in_progress';
	/** The lease's fencing token: the attempt that holds it (acquireLease only). */
	attempt?: number;
	leaseUntil?: string;
}

// One pool per credential, kept for the life of the n8n process: a delivery
// then costs one round trip on an open connection, not a connection and a
// SCRAM handshake. Keyed by what the connection is made of (the password
// hashed), so editing the credential opens a new pool.
const pools = new Map<string, Pool>();

/** How long an unused connection stays open: webhooks arrive in bursts minutes apart. */
const IDLE_MS = 5 * 60_000;

/**
 * poolFor returns the pool for a credential, as n8n's Postgres node connects
 * with it (host, port, database, user, password, SSL, unauthorised
 * certificates, maximum connections). An SSH tunnel is refused: the node
 * connects directly.
 */
export function poolFor(cred: PostgresCredential, credentialName: string): Pool {
	if (cred.sshTunnel) {
		throw new GuardError(
			'credential',
			`The Postgres credential "${credentialName}" connects through an SSH tunnel, which the Idempotency Guard does not open: give it a credential that reaches PostgreSQL directly (or use the keysvc store). Nothing was reserved.`,
		);
	}
	const config: PoolConfig = {
		host: cred.host,
		port: Number(cred.port),
		database: cred.database,
		user: cred.user,
		password: cred.password,
		max: Math.max(1, Number(cred.maxConnections) || 10),
		idleTimeoutMillis: IDLE_MS,
		connectionTimeoutMillis: 10_000,
		keepAlive: true,
		application_name: 'n8n-nodes-idemhook',
	};
	// As n8n's Postgres node reads the same fields.
	if (cred.allowUnauthorizedCerts === true) {
		config.ssl = { rejectUnauthorized: false };
	} else if (cred.ssl !== undefined && cred.ssl !== 'disable') {
		config.ssl = true;
	}
	const id = createHash('sha256').update(JSON.stringify(config)).digest('hex');
	let pool = pools.get(id);
	if (pool === undefined) {
		pool = new Pool(config);
		// An idle connection that PostgreSQL closes must not crash n8n: the
		// pool drops it and the next query opens another.
		pool.on('error', () => undefined);
		pools.set(id, pool);
	}
	return pool;
}

/**
 * checkTable validates a table name by ParseTable's rules: one part, or
 * schema.table, each a lower-case identifier that is not a reserved word.
 * It is the only text the node splices into SQL.
 */
export function checkTable(name: string): string {
	const parts = name.split('.');
	const ok =
		parts.length <= 2 && parts.every((p) => new RegExp(identifierPattern).test(p) && !reservedWords.has(p));
	if (!ok) {
		throw new GuardError(
			'config',
			`Events Table "${name}" is not a table name idemhook uses: lower-case letters, digits and '_' (not starting with a digit, no reserved word), as table or schema.table. Nothing was reserved.`,
		);
	}
	return name;
}

/** Where a query goes, and what to say when it fails. */
export interface Target {
	pool: Pool;
	table: string;
	credentialName: string;
	/** The execution that holds the key, for `idemhook guard`'s error workflow. */
	executionId?: string;
}

export async function reserve(t: Target, key: string): Promise<Decision> {
	const [sql, params] =
		t.executionId === undefined
			? [statements.reserve(t.table), [key]]
			: [statements.reserveForExecution(t.table), [key, t.executionId]];
	const res = await query(t, sql, params, NOT_RESERVED);
	return { status: res.rowCount === 1 ? 'new' : 'duplicate' };
}

export async function acquireLease(t: Target, key: string, leaseSeconds: number): Promise<Decision> {
	const [sql, params] =
		t.executionId === undefined
			? [statements.acquireLease(t.table, leaseSeconds), [key]]
			: [statements.acquireLeaseForExecution(t.table, leaseSeconds), [key, t.executionId]];
	const res = await query(t, sql, params, NOT_RESERVED);
	const row = res.rows[0] as { outcome: string; attempt: number | null; lease_until: Date | null };
	switch (row.outcome) {
		case 'acquired':
			return { status: 'new', attempt: row.attempt ?? undefined, leaseUntil: row.lease_until?.toISOString() };
		case 'done':
			return { status: 'duplicate' };
		default:
			return { status: 'in_progress' };
	}
}

/** Marks key done; false when no attempt held it (released, or cleaned up). */
export async function markDone(t: Target, key: string): Promise<boolean> {
	return (await query(t, statements.markDone(t.table), [key], 'The key was not marked done.')).rowCount === 1;
}

/** Gives key up (only while attempt holds it, when given); false when nothing was held. */
export async function release(t: Target, key: string, attempt?: number): Promise<boolean> {
	const [sql, params] =
		attempt === undefined ? [statements.release(t.table), [key]] : [statements.releaseLease(t.table), [key, attempt]];
	const res = await query(t, sql, params, 'The key was not released.');
	return res.rowCount === 1;
}

const NOT_RESERVED = 'Nothing was reserved.';

// query runs one statement; nothingDone says, in the error, what did not happen.
async function query(t: Target, sql: string, params: unknown[], nothingDone: string) {
	try {
		return await t.pool.query(sql, params);
	} catch (e) {
		throw explain(e, t, nothingDone);
	}
}

// Error codes of PostgreSQL (Appendix A) and of Node's sockets that say what to fix.
const credentialCodes = new Set(['28P01', '28000', '3D000', '42501', 'ENOTFOUND', 'EAI_AGAIN', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'SELF_SIGNED_CERT_IN_CHAIN', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'ERR_TLS_CERT_ALTNAME_INVALID']);
const unavailableCodes = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', '57P01', '57P02', '57P03', '53300', '08000', '08003', '08006', '08001', '08004']);

/** explain turns a failed query into a GuardError that says what to do. */
export function explain(e: unknown, t: Pick<Target, 'table' | 'credentialName'>, nothing = NOT_RESERVED): GuardError {
	const err = e as { code?: string; message?: string };
	const code = err.code ?? '';
	const message = err.message ?? String(e);
	if (code === '42P01' || code === '3F000') {
		return new GuardError(
			'schema',
			`Table ${t.table} does not exist in the database of credential "${t.credentialName}": apply idemhook's schema.sql there first (\`idemhook schema | psql …\`, or the schema.sql beside a generated workflow). ${nothing}`,
		);
	}
	if (code === '42703') {
		return new GuardError(
			'schema',
			`Table ${t.table} lacks a column this operation needs (${message}): the lease needs the lease schema (\`idemhook schema --guard lease | psql …\`). ${nothing}`,
		);
	}
	if (credentialCodes.has(code) || (code === '' && /password|SSL|certificate/i.test(message))) {
		return new GuardError(
			'credential',
			`The Postgres credential "${t.credentialName}" was refused: ${message}. Check its host, database, user, password and SSL settings. ${nothing}`,
		);
	}
	if (unavailableCodes.has(code) || /Connection terminated|timeout/i.test(message)) {
		return new GuardError(
			'unavailable',
			`PostgreSQL did not answer through credential "${t.credentialName}" (${message}): ${nothing} Retry later.`,
			5,
		);
	}
	return new GuardError('config', `PostgreSQL refused the statement on ${t.table}: ${message}. ${nothing}`);
}
