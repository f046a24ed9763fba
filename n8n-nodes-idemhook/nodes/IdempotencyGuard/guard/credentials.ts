import { createHash } from 'crypto';
import type { IExecuteFunctions } from 'n8n-workflow';

import { GuardError } from './errors';

/**
 * How long a credential read is used before it is read again. Reading it
 * costs n8n a query on its own database and a decryption, measured at more
 * than the reservation itself (docs/n8n-node.md#where-the-time-goes); a
 * store that fails to connect or is refused, or a signature that does not
 * match, is read again at once.
 */
export const CREDENTIAL_TTL_MS = 60_000;

interface Cached {
	value: unknown;
	digest: string;
	readAt: number;
}

// By credential type and id: a node's credential reference names it.
const cache = new Map<string, Cached>();

/** What cachedCredential returns: the value built from the credential, and its read. */
export interface CredentialRead<T> {
	value: T;
	/** Whether the value came from a read made earlier. */
	cached: boolean;
	/** The read's digest: two reads of the same data have the same one. */
	digest: string;
}

/**
 * cachedCredential returns build(data, name) for the node's credential of
 * type, read at most CREDENTIAL_TTL_MS ago, or now when fresh is set. A
 * credential n8n cannot read fails with a GuardError whose message is
 * unreadable(name, reason); build may throw its own.
 */
export async function cachedCredential<T>(
	ctx: IExecuteFunctions,
	type: string,
	fresh: boolean,
	unreadable: (name: string, reason: string) => string,
	build: (data: Record<string, unknown>, name: string) => T,
): Promise<CredentialRead<T>> {
	const ref = ctx.getNode().credentials?.[type];
	const name = ref?.name ?? type;
	const id = ref?.id ? `${type}:${ref.id}` : undefined;
	const hit = id === undefined ? undefined : cache.get(id);
	if (hit && !fresh && Date.now() - hit.readAt < CREDENTIAL_TTL_MS) {
		return { value: hit.value as T, cached: true, digest: hit.digest };
	}
	let data: Record<string, unknown>;
	try {
		data = await ctx.getCredentials(type);
	} catch (e) {
		throw credentialError(unreadable(name, (e as Error).message));
	}
	const value = build(data, name);
	const digest = createHash('sha256').update(JSON.stringify(data)).digest('hex');
	if (id !== undefined) cache.set(id, { value, digest, readAt: Date.now() });
	return { value, cached: false, digest };
}

function credentialError(message: string): GuardError {
	return new GuardError('credential', message);
}
