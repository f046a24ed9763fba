import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import { GuardError } from './guard/errors';
import type { Routed } from './guard/reserve.operation';
import { cryptoSecret, pathOf, receive, routeOf, schemaPrefixOf, type ReceiptOptions } from './receipt';
import type { PostgresStore } from './transport/postgres';

/**
 * The outputs of Save Inbox Receipt: Received, Rejected, and Start Worker
 * with that setting. An expression in the editor, as guardOutputs: it reads
 * nothing but its argument.
 */
export const receiptOutputs = (parameters: { receipt?: { workerOutput?: boolean } }) => {
	const outputs = [
		{ type: 'main', displayName: 'Received' },
		{ type: 'main', displayName: 'Rejected' },
	];
	if (parameters.receipt?.workerOutput === true) {
		outputs.push({ type: 'main', displayName: 'Start Worker' });
	}
	return outputs;
};

/**
 * execute saves item i in the inbox (the inbox pattern's receiver): the
 * signature checked with the Crypto credential, the receipt key, type and
 * account, the kept headers. The item that leaves is the decision alone:
 * the receipt holds the body. workerOutput is whether the node has Start
 * Worker, read once with its outputs, so that no item goes to an output the
 * node does not have.
 */
export async function execute(
	ctx: IExecuteFunctions,
	store: PostgresStore,
	item: INodeExecutionData,
	i: number,
	workerOutput: boolean,
): Promise<Routed> {
	const got = await receive(ctx, item, i, receiptOptions(ctx, i), store, cryptoSecret(ctx));
	const [output, json] = routeOf(got, workerOutput);
	return [output, { json, pairedItem: { item: i } }];
}

// receiptOptions reads the Save Inbox Receipt settings of item i.
function receiptOptions(ctx: IExecuteFunctions, i: number): ReceiptOptions {
	const r = ctx.getNodeParameter('receipt', i, {}) as IDataObject;
	const options = ctx.getNodeParameter('options', i, {}) as IDataObject;
	const text = (v: unknown, fallback: string) => (v === undefined || v === null ? fallback : String(v));
	return {
		signature: String(ctx.getNodeParameter('signature', i, '')),
		toleranceSeconds: wholeSeconds('Tolerance (Seconds)', ctx.getNodeParameter('toleranceSeconds', i, 300)),
		preset: String(ctx.getNodeParameter('preset', i, '')),
		scope: String(ctx.getNodeParameter('scope', i, '')),
		binaryProperty: String(options.binaryProperty ?? 'data'),
		defaultAccount: text(r.defaultAccount, 'default'),
		typeHeader: text(r.typeHeader, '').toLowerCase(),
		typePath: pathOf(text(r.typePath, 'type')),
		accountHeader: text(r.accountHeader, '').toLowerCase(),
		accountPath: pathOf(text(r.accountPath, 'account')),
		keptHeaders: text(r.keptHeaders, '')
			.split(',')
			.map((h) => h.trim().toLowerCase())
			.filter((h) => h !== ''),
		schemaPrefix: schemaPrefixOf(text(r.schema, '')),
		drainLeaseSeconds: wholeSeconds('Drain Lease (Seconds)', r.drainLeaseSeconds ?? 120),
	};
}

function wholeSeconds(name: string, v: unknown): number {
	const n = Number(v);
	if (!Number.isInteger(n) || n < 1 || n > 86400) {
		throw new GuardError('config', `${name} must be a whole number from 1 to 86400, not ${JSON.stringify(v)}. Nothing was saved.`);
	}
	return n;
}
