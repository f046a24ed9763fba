import type {
	IDataObject,
	IExecuteFunctions,
	INodeExecutionData,
	INodeType,
	INodeTypeDescription,
} from 'n8n-workflow';
import { NodeConnectionTypes, NodeOperationError } from 'n8n-workflow';

import { GuardError } from './errors';
import { providers } from './generated';
import { keyOf } from './key';
import * as keysvc from './keysvc';
import * as pg from './postgres';
import { cryptoSecret, pathOf, receive, routeOf, schemaPrefixOf, type ReceiptOptions } from './receipt';
import { storeOf, type StoreKind } from './store';

type Operation = 'reserve' | 'acquireLease' | 'complete' | 'release' | 'receive';

// The outputs of each operation: a decision routes an item, the others pass
// it on; with the Error Output option, errors leave by an output of the
// node's own, last. Written as an expression over the parameters, as n8n's
// Switch node does, so the editor draws the outputs the settings give.
const outputsOf = (parameters: { operation?: string; options?: { errorOutput?: boolean }; receipt?: { workerOutput?: boolean } }) => {
	const operation = parameters.operation ?? 'reserve';
	let outputs = [{ type: 'main', displayName: 'Done' }];
	if (operation === 'reserve') {
		outputs = [
			{ type: 'main', displayName: 'New' },
			{ type: 'main', displayName: 'Duplicate' },
		];
	}
	if (operation === 'acquireLease') {
		outputs = [
			{ type: 'main', displayName: 'New' },
			{ type: 'main', displayName: 'Duplicate' },
			{ type: 'main', displayName: 'In Progress' },
		];
	}
	if (operation === 'receive') {
		outputs = [
			{ type: 'main', displayName: 'Received' },
			{ type: 'main', displayName: 'Rejected' },
		];
		if (parameters.receipt?.workerOutput === true) {
			outputs.push({ type: 'main', displayName: 'Start Worker' });
		}
	}
	if (parameters.options?.errorOutput === true) {
		outputs.push({ type: 'main', displayName: 'Error' });
	}
	return outputs;
};

const DEFAULT_KEY = "={{ $('Idempotency Guard').item.json.idempotency.key }}";
const DEFAULT_ATTEMPT = "={{ $('Idempotency Guard').item.json.idempotency.attempt }}";

export class IdempotencyGuard implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Idempotency Guard',
		name: 'idempotencyGuard',
		icon: 'file:idempotencyGuard.svg',
		group: ['transform'],
		version: 1,
		subtitle: '={{$parameter["operation"] + " · " + $parameter["store"]}}',
		description:
			'Let each webhook event through once: reserve its idempotency key atomically in your PostgreSQL (or keysvc) and route new events and duplicates apart',
		defaults: { name: 'Idempotency Guard' },
		inputs: [NodeConnectionTypes.Main],
		outputs: `={{(${outputsOf})($parameter)}}`,
		credentials: [
			{ name: 'postgres', required: true, displayOptions: { show: { store: ['postgres'] } } },
			{ name: 'idemhookKeysvcApi', required: true, displayOptions: { show: { store: ['keysvc'] } } },
			{
				name: 'crypto',
				required: true,
				displayOptions: { show: { operation: ['receive'], signature: providers.filter((p) => p.hmac !== '').map((p) => p.value) } },
			},
		],
		properties: [
			{
				displayName: 'Store',
				name: 'store',
				type: 'options',
				noDataExpression: true,
				options: [
					{
						name: 'PostgreSQL',
						value: 'postgres',
						description: "Reserve in the processed_events table of the Postgres credential's database",
					},
					{ name: 'Keysvc', value: 'keysvc', description: "Reserve through idemhook's key service" },
				],
				default: 'postgres',
			},
			{
				displayName: 'Operation',
				name: 'operation',
				type: 'options',
				noDataExpression: true,
				options: [
					{
						name: 'Reserve',
						value: 'reserve',
						action: 'Reserve the event key',
						description: "Reserve the event's key: the first delivery goes to New, every later one to Duplicate",
					},
					{
						name: 'Acquire Lease',
						value: 'acquireLease',
						action: 'Acquire a lease on the event key',
						description:
							'Hold the key while the step runs: New, Duplicate once completed, In Progress while another attempt holds it; an expired lease is taken over',
					},
					{
						name: 'Complete',
						value: 'complete',
						action: 'Mark the event key done',
						description: "After the step succeeded: the key's lease ends as done",
					},
					{
						name: 'Release',
						value: 'release',
						action: 'Release the event key',
						description: "After the step failed: give the key up so that the provider's retry runs the step",
					},
					{
						name: 'Save Inbox Receipt',
						value: 'receive',
						action: 'Save the event in the inbox',
						description:
							"The inbox pattern's receiver (idemhook generate --pattern inbox): check the signature, save the event once in inbox_events, and say whether to start a worker. Received: saved now or before; Rejected: answer 401 or 400; Start Worker (an option): saved now, and no worker drains.",
					},
				],
				default: 'reserve',
			},
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
				displayName: 'Key',
				name: 'key',
				type: 'string',
				default: DEFAULT_KEY,
				required: true,
				description: 'The key the guard reserved, read from its output (rename the node here if you renamed it)',
				displayOptions: { show: { operation: ['complete', 'release'] } },
			},
			{
				displayName: 'Attempt',
				name: 'attempt',
				type: 'string',
				default: DEFAULT_ATTEMPT,
				description:
					'With a lease: the attempt that holds it (the guard\'s idempotency.attempt), so that only the holder gives it up. Empty for a reservation.',
				displayOptions: { show: { operation: ['release'], store: ['postgres'] } },
			},
			{
				displayName: 'Key Preset',
				name: 'preset',
				type: 'options',
				options: [
					{ name: 'Body ID (Default, Stripe)', value: '', description: 'The body\'s top-level "id", else the SHA-256 of the body' },
					...providers
						.filter((p) => p.value !== 'stripe')
						.map((p) => ({ name: p.name, value: p.value, description: `The ID ${p.name} gives each event` })),
				],
				default: '',
				description: 'Where the event ID that stays the same across retries is (docs/key-spec.md)',
				displayOptions: { show: { operation: ['reserve', 'acquireLease', 'receive'] } },
			},
			{
				displayName: 'Scope',
				name: 'scope',
				type: 'string',
				default: '',
				description:
					'Keeps the keys of several senders apart (GitHub, Shopify and Standard Webhooks presets only): up to 64 of A-Z a-z 0-9 . _ -',
				displayOptions: { show: { operation: ['reserve', 'acquireLease', 'receive'] } },
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
					{ displayName: 'Inbox Schema', name: 'schema', type: 'string', default: '', description: "The PostgreSQL schema of inbox_events and inbox_drainer; empty for the search path's" },
					{ displayName: 'Default Account', name: 'defaultAccount', type: 'string', default: 'default', description: 'The account of an event that names none' },
					{ displayName: 'Account Header', name: 'accountHeader', type: 'string', default: '', description: 'A header that names the account; else Account Path' },
					{ displayName: 'Account Path', name: 'accountPath', type: 'string', default: 'account', description: 'Where the body names the account, dot-separated' },
					{ displayName: 'Type Header', name: 'typeHeader', type: 'string', default: '', description: "A header that names the event's type; else Type Path" },
					{ displayName: 'Type Path', name: 'typePath', type: 'string', default: 'type', description: "Where the body names the event's type, dot-separated" },
					{ displayName: 'Kept Headers', name: 'keptHeaders', type: 'string', default: '', description: 'Request headers saved with the event, comma-separated' },
					{
						displayName: 'Drain Lease (Seconds)',
						name: 'drainLeaseSeconds',
						type: 'number',
						typeOptions: { minValue: 1, maxValue: 86400 },
						default: 120,
						description: 'How long the worker a receipt starts holds the drain before another may start',
					},
					{
						displayName: 'Start Worker Output',
						name: 'workerOutput',
						type: 'boolean',
						default: false,
						description:
							'Whether a new receipt that found no worker draining leaves by an output of its own, Start Worker, with drain: true for the worker, instead of Received (and an If node on wake after it)',
					},
				],
			},
			{
				displayName: 'Lease (Seconds)',
				name: 'leaseSeconds',
				type: 'number',
				typeOptions: { minValue: 1, maxValue: 86400 },
				default: 300,
				description: "How long an attempt holds the key: more than your step's worst running time",
				displayOptions: { show: { operation: ['acquireLease'] } },
			},
			{
				displayName: 'Options',
				name: 'options',
				type: 'collection',
				placeholder: 'Add option',
				default: {},
				options: [
					{
						displayName: 'Error Output',
						name: 'errorOutput',
						type: 'boolean',
						default: false,
						description:
							"Whether errors (an empty body, the store down, a setup to fix) leave by an Error output of the node's own instead of failing the execution. It does what Settings → On Error → Continue (using error output) does, without the few milliseconds n8n spends on that setting in every execution.",
					},
					{
						displayName: 'Binary Property',
						name: 'binaryProperty',
						type: 'string',
						default: 'data',
						description: "Where the Webhook keeps the raw body (its Raw Body option's binary)",
					},
					{
						displayName: 'Events Table',
						name: 'eventsTable',
						type: 'string',
						default: 'processed_events',
						description: "The table of idemhook's schema.sql (table or schema.table)",
					},
					{
						displayName: 'Record Execution',
						name: 'recordExecution',
						type: 'boolean',
						default: false,
						description:
							"Whether to keep the n8n execution that holds each key in the table's execution_id column, for an error workflow that gives a failed execution's keys up (idemhook guard)",
					},
					{
						displayName: 'Signature Check (Keysvc)',
						name: 'provider',
						type: 'options',
						options: [{ name: 'None', value: '' }, ...providers.map((p) => ({ name: p.name, value: p.value }))],
						default: '',
						description: "The provider whose signature keysvc verifies, with the secret keysvc holds, before it reserves",
					},
					{
						displayName: 'Timeout (Seconds)',
						name: 'timeoutSeconds',
						type: 'number',
						typeOptions: { minValue: 1 },
						default: 10,
						description: 'How long to wait for keysvc',
					},
				],
			},
		],
	};

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		const items = this.getInputData();
		const operation = this.getNodeParameter('operation', 0) as Operation;
		const errorOutput = (this.getNodeParameter('options', 0, {}) as IDataObject).errorOutput === true;
		const workerOutput = operation === 'receive' && (this.getNodeParameter('receipt', 0, {}) as IDataObject).workerOutput === true;
		const routes = outputsOf({ operation, options: { errorOutput }, receipt: { workerOutput } }).map((): INodeExecutionData[] => []);
		let target: Target | undefined;
		for (let i = 0; i < items.length; i++) {
			try {
				target ??= await targetOf(this);
				let decided: [number, IDataObject];
				try {
					decided = await decide(this, target, operation, items[i], i, workerOutput);
				} catch (e) {
					// A store read from the credential a while ago that fails to
					// connect or is refused: the credential may have changed since.
					// Read it again, and try once more when it did.
					if (!target.cached || !(e instanceof GuardError) || (e.kind !== 'credential' && e.kind !== 'unavailable')) throw e;
					const again = await targetOf(this, true);
					if (again.digest === target.digest) throw e;
					target = again;
					decided = await decide(this, target, operation, items[i], i, workerOutput);
				}
				const [output, idempotency] = decided;
				// A receipt is saved with the body: what follows it needs only
				// the decision, not the delivery again.
				routes[output].push(
					operation === 'receive'
						? { json: idempotency, pairedItem: { item: i } }
						: { json: { ...items[i].json, idempotency }, binary: items[i].binary, pairedItem: { item: i } },
				);
			} catch (e) {
				const guardError = e instanceof GuardError ? e : new GuardError('config', String((e as Error)?.message ?? e));
				// A node that throws under "continue" has n8n pass its input
				// on through the first output, which runs the step: never
				// throw then. The item goes to the last output: the node's own
				// Error output; else n8n moves an item whose json is only error
				// and details to its error output (an item.error would make it
				// replace that json with the message alone); under "continue
				// (regular output)" it stays on the last output, which does
				// not run the step either.
				if (!errorOutput && !this.continueOnFail()) {
					throw new NodeOperationError(this.getNode(), guardError.message, { itemIndex: i });
				}
				const details: IDataObject = { status: guardError.kind, httpStatus: guardError.httpStatus };
				if (guardError.retryAfter !== undefined) details.retryAfter = guardError.retryAfter;
				routes[routes.length - 1].push({ json: { error: guardError.message, details }, pairedItem: { item: i } });
			}
		}
		return routes;
	}
}

/** What an execution reserves with: its store, with this execution's settings. */
type Target = {
	/** Whether the store came from a credential read earlier, and that read's digest. */
	cached: boolean;
	digest: string;
} & ({ kind: 'postgres'; pg: pg.Target } | { kind: 'keysvc'; keysvc: keysvc.KeysvcTarget });

async function targetOf(ctx: IExecuteFunctions, fresh = false): Promise<Target> {
	const kind = ctx.getNodeParameter('store', 0) as StoreKind;
	const options = ctx.getNodeParameter('options', 0, {}) as IDataObject;
	const { store, cached, digest } = await storeOf(ctx, kind, fresh);
	if (store.kind === 'keysvc') {
		return {
			kind: 'keysvc',
			cached,
			digest,
			keysvc: { cred: store.cred, credentialName: store.credentialName, timeoutMs: 1000 * (Number(options.timeoutSeconds) || 10) },
		};
	}
	return {
		kind: 'postgres',
		cached,
		digest,
		pg: {
			pool: store.pool,
			table: pg.checkTable(String(options.eventsTable ?? 'processed_events')),
			credentialName: store.credentialName,
			executionId: options.recordExecution === true ? ctx.getExecutionId() : undefined,
		},
	};
}

/**
 * decide runs the operation for one item: the output it goes to, and what it
 * adds. workerOutput is whether the node has Start Worker, read once with its
 * outputs, so that no item is routed to an output the node does not have.
 */
async function decide(
	ctx: IExecuteFunctions,
	target: Target,
	operation: Operation,
	item: INodeExecutionData,
	i: number,
	workerOutput: boolean,
): Promise<[number, IDataObject]> {
	if (operation === 'complete' || operation === 'release') {
		const key = String(ctx.getNodeParameter('key', i, '') ?? '');
		if (key === '') {
			throw new GuardError('config', `No key to ${operation === 'complete' ? 'complete' : 'release'}: set Key to the guard's idempotency.key (the node that reserved it, by its name).`);
		}
		if (operation === 'complete') {
			const done = target.kind === 'postgres' ? await pg.markDone(target.pg, key) : await keysvc.markDone(target.keysvc, key);
			return [0, { key, status: 'done', completed: done }];
		}
		const attempt = target.kind === 'postgres' ? attemptOf(ctx.getNodeParameter('attempt', i, '')) : undefined;
		const released = target.kind === 'postgres' ? await pg.release(target.pg, key, attempt) : await keysvc.release(target.keysvc, key);
		return [0, { key, status: 'released', released }];
	}

	const options = ctx.getNodeParameter('options', i, {}) as IDataObject;
	const preset = String(ctx.getNodeParameter('preset', i, ''));
	const scope = String(ctx.getNodeParameter('scope', i, ''));
	if (operation === 'receive') {
		if (target.kind !== 'postgres') {
			throw new GuardError('config', "Save Inbox Receipt saves in PostgreSQL: choose the PostgreSQL store (keysvc has an inbox of its own: idemhook generate --pattern inbox --receiver keysvc). Nothing was saved.");
		}
		const got = await receive(ctx, item, i, receiptOptions(ctx, i, preset, scope, options), { ...target.pg, table: 'inbox_events' }, cryptoSecret(ctx));
		return routeOf(got, workerOutput);
	}
	const leaseSeconds = operation === 'acquireLease' ? leaseOf(ctx.getNodeParameter('leaseSeconds', i, 300)) : undefined;
	const k = await keyOf(ctx, item, i, { preset, scope, binaryProperty: String(options.binaryProperty ?? 'data') });

	let decision: pg.Decision & { retryAfterSeconds?: number };
	let key = k.key;
	let source = k.source;
	if (target.kind === 'postgres') {
		decision = leaseSeconds === undefined ? await pg.reserve(target.pg, k.key) : await pg.acquireLease(target.pg, k.key, leaseSeconds);
	} else {
		if (k.body.length === 0) {
			throw new GuardError(
				'config',
				"keysvc keys a delivery by its exact bytes, and the Webhook kept none for this one (a multipart form, or no Raw Body option): turn the Webhook's Raw Body option on, or use the PostgreSQL store. Nothing was reserved.",
			);
		}
		const headers = (item.json.headers ?? {}) as Record<string, unknown>;
		const d = await keysvc.reserve(target.keysvc, {
			body: k.body,
			headers,
			preset,
			scope,
			provider: String(options.provider ?? ''),
			leaseSeconds,
		});
		decision = d;
		// keysvc derived the key itself, by the same spec; an in-progress
		// answer names none.
		key = d.key || k.key;
		source = d.source || k.source;
	}
	const idempotency: IDataObject = { key, source, eventType: k.eventType, status: decision.status };
	if (decision.attempt !== undefined) idempotency.attempt = decision.attempt;
	if (decision.leaseUntil !== undefined) idempotency.leaseUntil = decision.leaseUntil;
	switch (decision.status) {
		case 'new':
			return [0, idempotency];
		case 'duplicate':
			return [1, idempotency];
		default:
			// As the generated lease workflow answers: retry within the lease, at most 5 minutes.
			idempotency.retryAfter = decision.retryAfterSeconds ?? Math.min(leaseSeconds ?? 300, 300);
			return [2, idempotency];
	}
}

// receiptOptions reads the Save Inbox Receipt settings of item i.
function receiptOptions(ctx: IExecuteFunctions, i: number, preset: string, scope: string, options: IDataObject): ReceiptOptions {
	const r = ctx.getNodeParameter('receipt', i, {}) as IDataObject;
	const text = (v: unknown, fallback: string) => (v === undefined || v === null ? fallback : String(v));
	return {
		signature: String(ctx.getNodeParameter('signature', i, '')),
		toleranceSeconds: wholeSeconds('Tolerance (Seconds)', ctx.getNodeParameter('toleranceSeconds', i, 300)),
		preset,
		scope,
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

function leaseOf(v: unknown): number {
	const n = Number(v);
	if (!Number.isInteger(n) || n < 1 || n > 86400) {
		throw new GuardError('config', `Lease (Seconds) must be a whole number from 1 to 86400, not ${JSON.stringify(v)}. Nothing was reserved.`);
	}
	return n;
}

function attemptOf(v: unknown): number | undefined {
	if (v === undefined || v === null || v === '') return undefined;
	const n = Number(v);
	if (!Number.isInteger(n) || n < 1) {
		throw new GuardError('config', `Attempt must be the lease's attempt (a whole number from 1), not ${JSON.stringify(v)}. The key was not released.`);
	}
	return n;
}
