import type { IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import { GuardError } from './errors';
import { decide, type Routed } from './reserve.operation';
import type { GuardStore } from './store';

/**
 * execute acquires the lease on item i's key for Lease (Seconds): New when
 * this attempt holds it (json.idempotency.attempt is its fencing token),
 * Duplicate once an attempt completed the key, In Progress while another
 * attempt holds it (json.idempotency.retryAfter says when to come back). An
 * expired lease is taken over by the next attempt.
 */
export async function execute(ctx: IExecuteFunctions, store: GuardStore, item: INodeExecutionData, i: number): Promise<Routed> {
	return decide(ctx, store, item, i, leaseOf(ctx.getNodeParameter('leaseSeconds', i, 300)));
}

function leaseOf(v: unknown): number {
	const n = Number(v);
	if (!Number.isInteger(n) || n < 1 || n > 86400) {
		throw new GuardError('config', `Lease (Seconds) must be a whole number from 1 to 86400, not ${JSON.stringify(v)}. Nothing was reserved.`);
	}
	return n;
}
