import { createHash } from 'crypto';
import type { IExecuteFunctions } from 'n8n-workflow';
import type { Pool } from 'pg';

import { GuardError } from './errors';
import type { KeysvcCredential } from './keysvc';
import { poolFor, type PostgresCredential } from './postgres';

/** Where the node reserves: a PostgreSQL pool, or keysvc's URL and token. */
export type Store =
	| { kind: 'postgres'; pool: Pool; credentialName: string }
	| { kind: 'keysvc'; cred: KeysvcCredential; credentialName: string };

export type StoreKind = Store['kind'];

const credentialType = (kind: StoreKind) => (kind === 'postgres' ? 'postgres' : 'idemhookKeysvcApi');

/**
 * How long a credential read is used before it is read again. Reading it
 * costs n8n a query on its own database and a decryption, measured at more
 * than the reservation itself (docs/n8n-node.md#where-the-time-goes); a
 * store that fails to connect or is refused is read again at once.
 */
export const CREDENTIAL_TTL_MS = 60_000;

interface Cached {
	store: Store;
	digest: string;
	readAt: number;
}

// By credential id: a node's credential reference names it.
const cache = new Map<string, Cached>();

/**
 * storeOf returns the node's store, read from its credential at most
 * CREDENTIAL_TTL_MS ago, or now when fresh is set; cached tells which.
 */
export async function storeOf(ctx: IExecuteFunctions, kind: StoreKind, fresh = false): Promise<{ store: Store; cached: boolean; digest: string }> {
	const type = credentialType(kind);
	const ref = ctx.getNode().credentials?.[type];
	const credentialName = ref?.name ?? type;
	const id = ref?.id ? `${type}:${ref.id}` : undefined;
	const hit = id === undefined ? undefined : cache.get(id);
	if (hit && !fresh && Date.now() - hit.readAt < CREDENTIAL_TTL_MS) {
		return { store: hit.store, cached: true, digest: hit.digest };
	}
	let data: Record<string, unknown>;
	try {
		data = await ctx.getCredentials(type);
	} catch (e) {
		throw new GuardError(
			'credential',
			`The ${kind === 'postgres' ? 'Postgres' : 'keysvc'} credential "${credentialName}" could not be read (${(e as Error).message}): choose one in the node. Nothing was reserved.`,
		);
	}
	const digest = createHash('sha256').update(JSON.stringify(data)).digest('hex');
	const store: Store =
		kind === 'postgres'
			? { kind, pool: poolFor(data as unknown as PostgresCredential, credentialName), credentialName }
			: { kind, cred: data as unknown as KeysvcCredential, credentialName };
	if (id !== undefined) cache.set(id, { store, digest, readAt: Date.now() });
	return { store, cached: false, digest };
}
