import type { IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import { keyParameterOf } from './complete.operation';
import { GuardError } from './errors';
import type { Routed } from './reserve.operation';
import type { GuardStore } from './store';

/**
 * execute gives Key up after the step failed, so that the provider's retry
 * runs the step again. With Attempt (a lease's fencing token), only while
 * that attempt holds the key. The item goes on with json.idempotency =
 * {key, status: 'released', released}.
 */
export async function execute(ctx: IExecuteFunctions, store: GuardStore, item: INodeExecutionData, i: number): Promise<Routed> {
	const key = keyParameterOf(ctx, i, 'release');
	const released = await store.release(key, attemptOf(ctx.getNodeParameter('attempt', i, '')), i);
	return [0, { json: { ...item.json, idempotency: { key, status: 'released', released } }, binary: item.binary, pairedItem: { item: i } }];
}

function attemptOf(v: unknown): number | undefined {
	if (v === undefined || v === null || v === '') return undefined;
	const n = Number(v);
	if (!Number.isInteger(n) || n < 1) {
		throw new GuardError('config', `Attempt must be the lease's attempt (a whole number from 1), not ${JSON.stringify(v)}. The key was not released.`);
	}
	return n;
}
