import type { IExecuteFunctions, INodeExecutionData, INodeType, INodeTypeDescription } from 'n8n-workflow';
import { NodeConnectionTypes } from 'n8n-workflow';

import * as acquireLease from './guard/acquireLease.operation';
import * as complete from './guard/complete.operation';
import { guardOutputs, outputsExpression } from './guard/outputs';
import { DEFAULT_VERSION, keyParameter, keyProperties, leaseProperty, NODE_VERSIONS, operationProperties, optionsProperty } from './guard/properties';
import { providers } from './guard/providers';
import * as release from './guard/release.operation';
import * as reserve from './guard/reserve.operation';
import { route } from './guard/router';
import { GuardError } from './guard/errors';
import { KEYSVC_CREDENTIAL, openKeysvc, type KeysvcStore } from './transport/keysvc';

/**
 * The Idempotency Guard on keysvc, idemhook's key service: the package n8n
 * can verify (no runtime dependency, only its own credential). The
 * self-hosted package n8n-nodes-idemhook-postgres runs the same operations
 * (folder guard/) on PostgreSQL.
 */
export class IdempotencyGuard implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Idempotency Guard',
		name: 'idempotencyGuard',
		icon: { light: 'file:guard/idempotencyGuard.svg', dark: 'file:guard/idempotencyGuard.dark.svg' },
		group: ['transform'],
		version: NODE_VERSIONS,
		defaultVersion: DEFAULT_VERSION,
		subtitle: '={{$parameter["operation"]}}',
		description: "Store each webhook event's idempotency key once in idemhook's keysvc and route new events and duplicates apart",
		defaults: { name: 'Idempotency Guard' },
		usableAsTool: true,
		inputs: [NodeConnectionTypes.Main],
		outputs: outputsExpression(guardOutputs),
		// Not required: a workflow that 0.1.0 saved with its PostgreSQL store
		// has none, and n8n would refuse to publish it with nothing but
		// "Missing required credential"; published, each execution says
		// which command moves it (savedByPostgresPackage), and a node
		// without one says to choose one (openKeysvc). n8n reads a node's
		// credential by its type's first entry, whatever its version: one
		// entry for all.
		credentials: [{ name: KEYSVC_CREDENTIAL, required: false }],
		properties: [
			...operationProperties(),
			...keyProperties(['reserve', 'acquireLease']),
			keyParameter,
			leaseProperty,
			optionsProperty([
				{
					displayName: 'Signature Check',
					name: 'provider',
					type: 'options',
					options: [{ name: 'None', value: '' }, ...providers.map((p) => ({ name: p.name, value: p.value }))],
					default: '',
					description: 'The provider whose signature keysvc verifies, with the secret keysvc holds, before it reserves',
				},
				{
					displayName: 'Timeout (Seconds)',
					name: 'timeoutSeconds',
					type: 'number',
					typeOptions: { minValue: 1 },
					default: 10,
					description: 'How long to wait for keysvc',
				},
			]),
		],
	};

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		const operation = this.getNodeParameter('operation', 0) as string;
		const outputs = guardOutputs({
			operation,
			options: { errorOutput: (this.getNodeParameter('options', 0, {}) as { errorOutput?: boolean }).errorOutput },
		}).length;
		const earlier = savedByPostgresPackage(this, operation);
		return await route<KeysvcStore>(
			this,
			{
				acquireLease: acquireLease.execute,
				complete: complete.execute,
				release: release.execute,
				reserve: reserve.execute,
			},
			earlier === undefined ? openKeysvc : () => Promise.reject(earlier),
			outputs,
		);
	}
}

/**
 * savedByPostgresPackage is the error of a node that n8n-nodes-idemhook
 * 0.1.0 saved with its PostgreSQL store (the default then: a Postgres
 * credential and no keysvc one) or its inbox receipt: 0.2.0 moved both to
 * n8n-nodes-idemhook-postgres under another node type, and this package
 * cannot reach PostgreSQL. Such a node fails loudly, naming the one command
 * that moves the workflow; undefined for any other node.
 */
function savedByPostgresPackage(ctx: IExecuteFunctions, operation: string): GuardError | undefined {
	const node = ctx.getNode();
	const credentials = node.credentials ?? {};
	const postgres = credentials.postgres !== undefined && credentials[KEYSVC_CREDENTIAL] === undefined;
	if (!postgres && operation !== 'receive') return undefined;
	return new GuardError(
		'upgrade',
		`This Idempotency Guard was saved by n8n-nodes-idemhook 0.1.0 with its PostgreSQL store${operation === 'receive' ? ' (Save Inbox Receipt)' : ''}, which moved to the package n8n-nodes-idemhook-postgres in 0.2.0: install n8n-nodes-idemhook-postgres, then move this workflow to it with \`idemhook node-upgrade --workflow exported.json --out upgraded.json\` (on an export of the workflow: it rewrites the node type and keeps the Postgres credential), then import it, or replace this node with "Idempotency Guard (PostgreSQL)". Nothing was reserved.`,
	);
}
