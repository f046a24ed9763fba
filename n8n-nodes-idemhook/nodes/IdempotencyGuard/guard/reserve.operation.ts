import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import { keyOf } from './key';
import type { GuardStore } from './store';

/** An operation's result for one item: the output it leaves by, and the item. */
export type Routed = [output: number, item: INodeExecutionData];

/** Reserve's and Acquire Lease's outputs. */
export const NEW = 0;
export const DUPLICATE = 1;
export const IN_PROGRESS = 2;

/**
 * execute reserves the key of item i: New for the first delivery of its
 * event, Duplicate for every later one. The item goes on with
 * json.idempotency added (key, source, eventType, status). Slack's
 * url_verification goes to Duplicate with status url_verification and its
 * challenge, reserving nothing, so that a Respond node can echo it.
 */
export async function execute(ctx: IExecuteFunctions, store: GuardStore, item: INodeExecutionData, i: number): Promise<Routed> {
	return decide(ctx, store, item, i, undefined);
}

/**
 * decide derives item i's key and reserves it, or with leaseSeconds
 * acquires its lease, and routes the item by the store's answer.
 */
export async function decide(
	ctx: IExecuteFunctions,
	store: GuardStore,
	item: INodeExecutionData,
	i: number,
	leaseSeconds: number | undefined,
): Promise<Routed> {
	const options = ctx.getNodeParameter('options', i, {}) as IDataObject;
	const key = await keyOf(ctx, item, i, {
		preset: String(ctx.getNodeParameter('preset', i, '')),
		scope: String(ctx.getNodeParameter('scope', i, '')),
		binaryProperty: String(options.binaryProperty ?? 'data'),
	});
	const headers = (item.json.headers ?? {}) as Record<string, unknown>;
	// Slack checks the URL: answered here unless the store checks the
	// signature first (keysvc then answers it, after the check).
	const decision =
		key.challenge !== undefined && !store.checksSignature(i)
			? ({ status: 'url_verification', key: '', source: '', challenge: key.challenge } as const)
			: await store.reserve({ key, headers, index: i }, leaseSeconds);
	if (decision.status === 'url_verification') {
		const idempotency: IDataObject = { status: decision.status, challenge: decision.challenge ?? '' };
		return [DUPLICATE, { json: { ...item.json, idempotency }, binary: item.binary, pairedItem: { item: i } }];
	}
	// The store's key where it named one: keysvc derives it itself, by the
	// same spec, and a tenant's token gives it the tenant's prefix.
	const idempotency: IDataObject = {
		key: decision.key || key.key,
		source: decision.source || key.source,
		eventType: key.eventType,
		status: decision.status,
	};
	if (decision.attempt !== undefined) idempotency.attempt = decision.attempt;
	if (decision.leaseUntil !== undefined) idempotency.leaseUntil = decision.leaseUntil;
	let output = NEW;
	if (decision.status === 'duplicate') output = DUPLICATE;
	if (decision.status === 'in_progress') {
		output = IN_PROGRESS;
		// As the generated lease workflow answers: retry within the lease, at most 5 minutes.
		idempotency.retryAfter = decision.retryAfter ?? Math.min(leaseSeconds ?? 300, 300);
	}
	return [output, { json: { ...item.json, idempotency }, binary: item.binary, pairedItem: { item: i } }];
}
