import type { INodeProperties, INodePropertyOptions } from 'n8n-workflow';

import { providers } from './providers';

/** The guard's operations, as the Operation parameter offers them. */
export const guardOperations: INodePropertyOptions[] = [
	{
		name: 'Acquire Lease',
		value: 'acquireLease',
		action: 'Acquire a lease on the event key',
		description:
			"Hold the key while the step runs: New, Duplicate once completed, In Progress while another attempt holds it (answer 409 with Retry-After); a dead attempt's lease is taken over when it expires. Complete after the step, Release when it fails.",
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
		name: 'Reserve',
		value: 'reserve',
		action: 'Reserve the event key',
		description:
			"First sight wins, at most once: the first delivery goes to New, every later one to Duplicate, even while the first runs. An attempt that dies before its step commits loses the event (its retries are duplicates); Release after a failed step.",
	},
];

/**
 * The node's versions. n8n leaves a parameter equal to its default out of a
 * saved workflow, so a default that changes under one version would change
 * what deployed workflows do: a new default comes with a new version, and
 * each version keeps its own (n8n's rule for breaking node changes).
 * Version 1 (packages 0.2) reserves by default; version 2 (0.3 on) acquires
 * a lease, which loses no event whose attempt dies.
 */
export const NODE_VERSIONS = [1, 2];
export const DEFAULT_VERSION = 2;

/**
 * The Operation parameter, one per version for its default: the guard's
 * operations and a node's own, in the order n8n's linter wants (by name).
 */
export function operationProperties(own: INodePropertyOptions[] = []): INodeProperties[] {
	const operation = (fallback: string, versions: Array<number | { _cnd: { gte: number } }>): INodeProperties => ({
		displayName: 'Operation',
		name: 'operation',
		type: 'options',
		noDataExpression: true,
		options: [...guardOperations, ...own].sort((a, b) => a.name.localeCompare(b.name)),
		default: fallback,
		displayOptions: { show: { '@version': versions } },
	});
	return [operation('reserve', [1]), operation('acquireLease', [{ _cnd: { gte: 2 } }])];
}

const DEFAULT_KEY = "={{ $('Idempotency Guard').item.json.idempotency.key }}";

/** Where the key comes from: the shared properties of the operations that derive one. */
export function keyProperties(operations: string[]): INodeProperties[] {
	return [
		{
			displayName: 'Key Preset',
			name: 'preset',
			type: 'options',
			options: [
				{ name: 'Body ID (Default, Stripe)', value: '', description: "The body's top-level ID, else the SHA-256 of the body" },
				...providers
					.filter((p) => p.value !== 'stripe')
					.map((p) => ({ name: p.name, value: p.value, description: `The ID ${p.name} gives each event` })),
			].sort((a, b) => a.name.localeCompare(b.name)),
			default: '',
			description: 'Where the event ID that stays the same across retries is (docs/key-spec.md)',
			displayOptions: { show: { operation: operations } },
		},
		{
			displayName: 'Scope',
			name: 'scope',
			type: 'string',
			default: '',
			description:
				'Keeps the keys of several senders apart (GitHub, Shopify and Standard Webhooks presets only): up to 64 letters, digits, dots, underscores or hyphens',
			displayOptions: { show: { operation: operations } },
		},
	];
}

/** Complete's and Release's Key: the key the guard reserved, read from its output. */
export const keyParameter: INodeProperties = {
	displayName: 'Key',
	name: 'key',
	type: 'string',
	default: DEFAULT_KEY,
	required: true,
	description: 'The key the guard reserved, read from its output (rename the node here if you renamed it)',
	displayOptions: { show: { operation: ['complete', 'release'] } },
};

/** Acquire Lease's Lease (Seconds). */
export const leaseProperty: INodeProperties = {
	displayName: 'Lease (Seconds)',
	name: 'leaseSeconds',
	type: 'number',
	typeOptions: { minValue: 1, maxValue: 86400 },
	default: 300,
	description: "How long an attempt holds the key: more than your step's worst running time",
	displayOptions: { show: { operation: ['acquireLease'] } },
};

/** The options every guard has; a node adds its store's and sorts them (optionsProperty). */
export const guardOptions: INodeProperties[] = [
	{
		displayName: 'Binary Property',
		name: 'binaryProperty',
		type: 'string',
		default: 'data',
		description: "Where the Webhook keeps the raw body (its Raw Body option's binary)",
	},
	{
		displayName: 'Error Output',
		name: 'errorOutput',
		type: 'boolean',
		default: false,
		description:
			"Whether errors (an empty body, the store down, a setup to fix) leave by an Error output of the node's own instead of failing the execution. It does what Settings → On Error → Continue (using error output) does, without the few milliseconds n8n spends on that setting in every execution.",
	},
];

/** The Options collection: the guard's options and the store's, by display name. */
export function optionsProperty(own: INodeProperties[]): INodeProperties {
	return {
		displayName: 'Options',
		name: 'options',
		type: 'collection',
		placeholder: 'Add option',
		default: {},
		options: [...guardOptions, ...own].sort((a, b) => a.displayName.localeCompare(b.displayName)),
	};
}
