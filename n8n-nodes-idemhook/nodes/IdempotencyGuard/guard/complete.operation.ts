import type { IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import { GuardError } from './errors';
import type { Routed } from './reserve.operation';
import type { GuardStore } from './store';

/**
 * execute marks Key done after the step succeeded: later deliveries of the
 * event are duplicates. The item goes on with json.idempotency = {key,
 * status: 'done', completed}; completed is false when no attempt held the
 * key any more (it was released, or cleaned up).
 */
export async function execute(ctx: IExecuteFunctions, store: GuardStore, item: INodeExecutionData, i: number): Promise<Routed> {
	const key = keyParameterOf(ctx, i, 'complete');
	const completed = await store.complete(key, i);
	return [0, { json: { ...item.json, idempotency: { key, status: 'done', completed } }, binary: item.binary, pairedItem: { item: i } }];
}

/** keyParameterOf reads Key for item i; operation names what would not happen. */
export function keyParameterOf(ctx: IExecuteFunctions, i: number, operation: 'complete' | 'release'): string {
	const key = String(ctx.getNodeParameter('key', i, '') ?? '');
	if (key === '') {
		throw new GuardError('config', `No key to ${operation}: set Key to the guard's idempotency.key (the node that reserved it, by its name).`);
	}
	return key;
}
