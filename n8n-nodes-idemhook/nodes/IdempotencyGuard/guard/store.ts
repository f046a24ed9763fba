import type { ItemKey } from './key';

/**
 * A reservation's or a lease's result for one delivery; url_verification is
 * Slack checking the URL, which reserves nothing and wants challenge back.
 */
export interface Decision {
	status: 'new' | 'duplicate' | 'in_progress' | 'url_verification';
	/**
	 * The key the store holds: the node's own, or keysvc's (it derives the
	 * key itself, and a tenant's token gives it the tenant's prefix); '' for
	 * an attempt in progress that keysvc did not name.
	 */
	key: string;
	source: string;
	/** The lease's fencing token: the attempt that holds it (a lease only). */
	attempt?: number;
	leaseUntil?: string;
	/** Seconds until an attempt in progress may be retried, when the store says. */
	retryAfter?: number;
	/** Slack's challenge, to answer a url_verification with. */
	challenge?: string;
}

/** One Webhook delivery: its key as the node derived it, and the headers it came with. */
export interface Delivery {
	key: ItemKey;
	headers: Record<string, unknown>;
	/** The item's index, for its parameters. */
	index: number;
}

/**
 * Where the guard holds keys: PostgreSQL (the self-hosted package, with the
 * user's Postgres credential) or keysvc (with the package's own credential).
 * Each method throws a GuardError saying what did not happen.
 */
export interface GuardStore {
	/**
	 * Whether the store checks item index's signature before it reserves
	 * (keysvc with a Signature Check): it then also answers Slack's
	 * url_verification, after the check.
	 */
	checksSignature(index: number): boolean;
	/** Reserves the delivery's key or, with leaseSeconds, acquires its lease. */
	reserve(d: Delivery, leaseSeconds?: number): Promise<Decision>;
	/** Marks key done; false when no attempt held it (released, or cleaned up). */
	complete(key: string, index: number): Promise<boolean>;
	/** Gives key up (only while attempt holds it, when given); false when nothing was held. */
	release(key: string, attempt: number | undefined, index: number): Promise<boolean>;
}

/** A store read from its credential, and whether that read was made earlier (see credentials.ts). */
export interface OpenedStore<S> {
	store: S;
	cached: boolean;
	digest: string;
}
