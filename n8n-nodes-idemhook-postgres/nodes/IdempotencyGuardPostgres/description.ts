import type { INodeProperties } from 'n8n-workflow';

import { guardOutputs } from './guard/outputs';
import { providers } from './guard/providers';
import { receiptOutputs } from './receive.operation';

// The self-hosted node's own parts of its description: Save Inbox
// Receipt's parameters and the outputs of every operation.

/** Save Inbox Receipt's own parameters. */
export const receiptProperties: INodeProperties[] = [
	{
		displayName: 'Signature Check',
		name: 'signature',
		type: 'options',
		options: [
			{ name: 'None', value: '' },
			...providers.filter((p) => p.hmac !== '').map((p) => ({ name: p.name, value: p.value })),
		],
		default: '',
		description: "The provider whose signature is checked, with the Crypto credential's Hmac Secret, before anything is saved",
		displayOptions: { show: { operation: ['receive'] } },
	},
	{
		displayName: 'Tolerance (Seconds)',
		name: 'toleranceSeconds',
		type: 'number',
		typeOptions: { minValue: 1, maxValue: 86400 },
		default: 300,
		description: 'How far a signed timestamp may be from now, both ways (Stripe, Slack)',
		displayOptions: { show: { operation: ['receive'] } },
	},
	{
		displayName: 'Receipt',
		name: 'receipt',
		type: 'collection',
		placeholder: 'Add setting',
		default: {},
		description: "Where the event's type and account are, and what is kept with it: idemhook generate writes these from the effect rules",
		displayOptions: { show: { operation: ['receive'] } },
		options: [
			{ displayName: 'Account Header', name: 'accountHeader', type: 'string', default: '', description: 'A header that names the account; else Account Path' },
			{ displayName: 'Account Path', name: 'accountPath', type: 'string', default: 'account', description: 'Where the body names the account, dot-separated' },
			{ displayName: 'Default Account', name: 'defaultAccount', type: 'string', default: 'default', description: 'The account of an event that names none' },
			{
				displayName: 'Drain Lease (Seconds)',
				name: 'drainLeaseSeconds',
				type: 'number',
				typeOptions: { minValue: 1, maxValue: 86400 },
				default: 120,
				description: 'How long the worker a receipt starts holds the drain before another may start',
			},
			{ displayName: 'Inbox Schema', name: 'schema', type: 'string', default: '', description: "The PostgreSQL schema of inbox_events and inbox_drainer; empty for the search path's" },
			{ displayName: 'Kept Headers', name: 'keptHeaders', type: 'string', default: '', description: 'Request headers saved with the event, comma-separated' },
			{
				displayName: 'Start Worker Output',
				name: 'workerOutput',
				type: 'boolean',
				default: false,
				description:
					'Whether a new receipt that found no worker draining leaves by an output of its own, Start Worker, with drain: true for the worker, instead of Received (and an If node on wake after it)',
			},
			{ displayName: 'Type Header', name: 'typeHeader', type: 'string', default: '', description: "A header that names the event's type; else Type Path" },
			{ displayName: 'Type Path', name: 'typePath', type: 'string', default: 'type', description: "Where the body names the event's type, dot-separated" },
		],
	},
];

/** The outputs of every operation: Save Inbox Receipt's, or the guard's. */
export const outputs: `={{${string}}}` = `={{((p, receipt, guard) => { const o = p.operation === 'receive' ? receipt(p) : guard(p); if (p.operation === 'receive' && p.options?.errorOutput === true) o.push({ type: 'main', displayName: 'Error' }); return o; })($parameter, ${receiptOutputs}, ${guardOutputs})}}`;

/** outputCount is how many outputs the node has for these parameters, as the editor draws them. */
export function outputCount(operation: string, errorOutput: boolean, workerOutput: boolean): number {
	if (operation === 'receive') return receiptOutputs({ receipt: { workerOutput } }).length + (errorOutput ? 1 : 0);
	return guardOutputs({ operation, options: { errorOutput } }).length;
}
