import type { IDataObject, IExecuteFunctions, INodeExecutionData, INodeType, INodeTypeDescription } from 'n8n-workflow';
import { NodeConnectionTypes } from 'n8n-workflow';

import { outputCount, outputs, receiptProperties } from './description';
import * as acquireLease from './guard/acquireLease.operation';
import * as complete from './guard/complete.operation';
import { DEFAULT_VERSION, keyParameter, keyProperties, leaseProperty, NODE_VERSIONS, operationProperties, optionsProperty } from './guard/properties';
import { providers } from './guard/providers';
import * as release from './guard/release.operation';
import * as reserve from './guard/reserve.operation';
import { route } from './guard/router';
import * as receive from './receive.operation';
import { openPostgres, type PostgresStore } from './transport/postgres';

/**
 * The Idempotency Guard on the user's PostgreSQL, for self-hosted n8n: the
 * guard's operations with n8n's Postgres credential, and the inbox
 * pattern's receipt with its Crypto credential. n8n-nodes-idemhook runs the
 * same operations on keysvc.
 */
export class IdempotencyGuardPostgres implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Idempotency Guard (PostgreSQL)',
		name: 'idempotencyGuardPostgres',
		icon: { light: 'file:guard/idempotencyGuard.svg', dark: 'file:guard/idempotencyGuard.dark.svg' },
		group: ['transform'],
		version: NODE_VERSIONS,
		defaultVersion: DEFAULT_VERSION,
		subtitle: '={{$parameter["operation"]}}',
		description:
			"Store each webhook event's idempotency key once in your PostgreSQL and route new events and duplicates apart, or save it in the inbox pattern's table",
		defaults: { name: 'Idempotency Guard' },
		usableAsTool: true,
		inputs: [NodeConnectionTypes.Main],
		outputs,
		credentials: [
			{ name: 'postgres', required: true },
			{
				name: 'crypto',
				required: true,
				displayOptions: { show: { operation: ['receive'], signature: providers.filter((p) => p.hmac !== '').map((p) => p.value) } },
			},
		],
		properties: [
			...operationProperties([
				{
					name: 'Save Inbox Receipt',
					value: 'receive',
					action: 'Save the event in the inbox',
					description:
						"The inbox pattern's receiver (idemhook generate --pattern inbox): check the signature, save the event once in inbox_events, and say whether to start a worker. Received: saved now or before; Rejected: answer 401 or 400; Start Worker (an option): saved now, and no worker drains.",
				},
			]),
			...receiptProperties,
			...keyProperties(['reserve', 'acquireLease', 'receive']),
			keyParameter,
			{
				displayName: 'Attempt',
				name: 'attempt',
				type: 'string',
				default: "={{ $('Idempotency Guard').item.json.idempotency.attempt }}",
				description:
					"With a lease: the attempt that holds it (the guard's idempotency.attempt), so that only the holder gives it up. Empty for a reservation.",
				displayOptions: { show: { operation: ['release'] } },
			},
			leaseProperty,
			optionsProperty([
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
			]),
		],
	};

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		const operation = this.getNodeParameter('operation', 0) as string;
		const errorOutput = (this.getNodeParameter('options', 0, {}) as IDataObject).errorOutput === true;
		const workerOutput = operation === 'receive' && (this.getNodeParameter('receipt', 0, {}) as IDataObject).workerOutput === true;
		return await route<PostgresStore>(
			this,
			{
				acquireLease: acquireLease.execute,
				complete: complete.execute,
				receive: (ctx, store, item, i) => receive.execute(ctx, store, item, i, workerOutput),
				release: release.execute,
				reserve: reserve.execute,
			},
			openPostgres,
			outputCount(operation, errorOutput, workerOutput),
		);
	}
}
