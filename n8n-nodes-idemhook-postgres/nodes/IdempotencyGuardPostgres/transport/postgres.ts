import { createHash } from 'crypto';
import type { IDataObject, IExecuteFunctions } from 'n8n-workflow';
import { Pool, type PoolConfig } from 'pg';

import { cachedCredential } from '../guard/credentials';
import { GuardError } from '../guard/errors';
import type { Decision, Delivery, GuardStore, OpenedStore } from '../guard/store';
import { identifierPattern, reservedWords, statements } from '../statements';

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

/**
 * PostgresStore reserves in the events table of the database the node's
 * Postgres credential names, with package pgsql's statements (statements.ts),
 * which schema.sql's workflows and keysvc run too.
 */
export class PostgresStore implements GuardStore {
	constructor(
		readonly pool: Pool,
		readonly table: string,
		readonly credentialName: string,
		/** The execution that holds the key, for `idemhook guard`'s error workflow. */
		private readonly executionId?: string,
	) {}

	/** The guard's operations check no signature on PostgreSQL (Save Inbox Receipt does, itself). */
	checksSignature(): boolean {
		return false;
	}

	async reserve(d: Delivery, leaseSeconds?: number): Promise<Decision> {
		const key = d.key.key;
		if (leaseSeconds === undefined) {
			const [sql, params] =
				this.executionId === undefined
					? [statements.reserve(this.table), [key]]
					: [statements.reserveForExecution(this.table), [key, this.executionId]];
			const res = await this.query(sql, params, NOT_RESERVED);
			return { status: res.rowCount === 1 ? 'new' : 'duplicate', key, source: d.key.source };
		}
		const [sql, params] =
			this.executionId === undefined
				? [statements.acquireLease(this.table, leaseSeconds), [key]]
				: [statements.acquireLeaseForExecution(this.table, leaseSeconds), [key, this.executionId]];
		const res = await this.query(sql, params, NOT_RESERVED);
		const row = res.rows[0] as { outcome: string; attempt: number | null; lease_until: Date | null };
		switch (row.outcome) {
			case 'acquired':
				return { status: 'new', key, source: d.key.source, attempt: row.attempt ?? undefined, leaseUntil: row.lease_until?.toISOString() };
			case 'done':
				return { status: 'duplicate', key, source: d.key.source };
			default:
				return { status: 'in_progress', key, source: d.key.source };
		}
	}

	async complete(key: string): Promise<boolean> {
		return (await this.query(statements.markDone(this.table), [key], 'The key was not marked done.')).rowCount === 1;
	}

	async release(key: string, attempt?: number): Promise<boolean> {
		const [sql, params] =
			attempt === undefined ? [statements.release(this.table), [key]] : [statements.releaseLease(this.table), [key, attempt]];
		return (await this.query(sql, params, 'The key was not released.')).rowCount === 1;
	}

	/** query runs one statement; nothingDone says, in the error, what did not happen. */
	async query(sql: string, params: unknown[], nothingDone: string) {
		try {
			return await this.pool.query(sql, params);
		} catch (e) {
			throw explain(e, this, nothingDone);
		}
	}
}

/**
 * openPostgres returns the node's store: its Postgres credential's pool,
 * read at most CREDENTIAL_TTL_MS ago (or now when fresh), with this
 * execution's Events Table and Record Execution options.
 */
export async function openPostgres(ctx: IExecuteFunctions, fresh: boolean): Promise<OpenedStore<PostgresStore>> {
	const options = ctx.getNodeParameter('options', 0, {}) as IDataObject;
	const table = checkTable(String(options.eventsTable ?? 'processed_events'));
	const executionId = options.recordExecution === true ? ctx.getExecutionId() : undefined;
	const read = await cachedCredential(
		ctx,
		'postgres',
		fresh,
		(name, reason) => `The Postgres credential "${name}" could not be read (${reason}): choose one in the node. Nothing was reserved.`,
		(data, credentialName) => ({ pool: poolFor(data as unknown as PostgresCredential, credentialName), credentialName }),
	);
	return { store: new PostgresStore(read.value.pool, table, read.value.credentialName, executionId), cached: read.cached, digest: read.digest };
}

const NOT_RESERVED = 'Nothing was reserved.';

// Error codes of PostgreSQL (Appendix A) and of Node's sockets that say what to fix.
const credentialCodes = new Set(['28P01', '28000', '3D000', '42501', 'ENOTFOUND', 'EAI_AGAIN', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'SELF_SIGNED_CERT_IN_CHAIN', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'ERR_TLS_CERT_ALTNAME_INVALID']);
const unavailableCodes = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', '57P01', '57P02', '57P03', '53300', '08000', '08003', '08006', '08001', '08004']);

/** explain turns a failed query into a GuardError that says what to do. */
export function explain(e: unknown, t: { table: string; credentialName: string }, nothing = NOT_RESERVED): GuardError {
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
