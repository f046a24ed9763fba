import type { IExecuteFunctions } from 'n8n-workflow';
import type { Pool } from 'pg';

import { cachedCredential } from './credentials';
import type { KeysvcCredential } from './keysvc';
import { poolFor, type PostgresCredential } from './postgres';

/** Where the node reserves: a PostgreSQL pool, or keysvc's URL and token. */
export type Store =
	| { kind: 'postgres'; pool: Pool; credentialName: string }
	| { kind: 'keysvc'; cred: KeysvcCredential; credentialName: string };

export type StoreKind = Store['kind'];

const credentialType = (kind: StoreKind) => (kind === 'postgres' ? 'postgres' : 'idemhookKeysvcApi');

/**
 * storeOf returns the node's store, read from its credential at most
 * CREDENTIAL_TTL_MS (credentials.ts) ago, or now when fresh is set; cached tells which.
 */
export async function storeOf(ctx: IExecuteFunctions, kind: StoreKind, fresh = false): Promise<{ store: Store; cached: boolean; digest: string }> {
	const read = await cachedCredential(
		ctx,
		credentialType(kind),
		fresh,
		(name, reason) =>
			`The ${kind === 'postgres' ? 'Postgres' : 'keysvc'} credential "${name}" could not be read (${reason}): choose one in the node. Nothing was reserved.`,
		(data, credentialName): Store =>
			kind === 'postgres'
				? { kind, pool: poolFor(data as unknown as PostgresCredential, credentialName), credentialName }
				: { kind, cred: data as unknown as KeysvcCredential, credentialName },
	);
	return { store: read.value, cached: read.cached, digest: read.digest };
}
