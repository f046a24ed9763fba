import type { IExecuteFunctions, INodeExecutionData, INodeType, INodeTypeDescription } from 'n8n-workflow';
import { NodeConnectionTypes } from 'n8n-workflow';

import * as acquireLease from './guard/acquireLease.operation';
import * as complete from './guard/complete.operation';
import { guardOutputs, outputsExpression } from './guard/outputs';
import { keyParameter, keyProperties, leaseProperty, operationProperty, optionsProperty } from './guard/properties';
import { providers } from './guard/providers';
import * as release from './guard/release.operation';
import * as reserve from './guard/reserve.operation';
import { route } from './guard/router';
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
		version: 1,
		subtitle: '={{$parameter["operation"]}}',
		description: "Store each webhook event's idempotency key once in idemhook's keysvc and route new events and duplicates apart",
		defaults: { name: 'Idempotency Guard' },
		usableAsTool: true,
		inputs: [NodeConnectionTypes.Main],
		outputs: outputsExpression(guardOutputs),
		credentials: [{ name: KEYSVC_CREDENTIAL, required: true }],
		properties: [
			operationProperty(),
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
		const outputs = guardOutputs({
			operation: this.getNodeParameter('operation', 0) as string,
			options: { errorOutput: (this.getNodeParameter('options', 0, {}) as { errorOutput?: boolean }).errorOutput },
		}).length;
		return await route<KeysvcStore>(
			this,
			{
				acquireLease: acquireLease.execute,
				complete: complete.execute,
				release: release.execute,
				reserve: reserve.execute,
			},
			openKeysvc,
			outputs,
		);
	}
}
