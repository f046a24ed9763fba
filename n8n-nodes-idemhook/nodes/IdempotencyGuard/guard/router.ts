import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

import { GuardError } from './errors';
import type { Routed } from './reserve.operation';
import type { OpenedStore } from './store';

/** An operation: what it does with item i, given the node's store. */
export type Operation<S> = (ctx: IExecuteFunctions, store: S, item: INodeExecutionData, i: number) => Promise<Routed>;

/** A node's store, read from its credential at most a minute ago, or now when fresh is set. */
export type StoreOpener<S> = (ctx: IExecuteFunctions, fresh: boolean) => Promise<OpenedStore<S>>;

/**
 * route runs the node's Operation for every input item and returns the
 * items by output: outputs is how many the node has now (its outputs
 * expression's, for these parameters), the last being its Error output when
 * it has one. An item the operation could not decide never leaves by a
 * decision's output: it goes to the Error output, or fails the execution.
 */
export async function route<S>(
	ctx: IExecuteFunctions,
	operations: Record<string, Operation<S>>,
	open: StoreOpener<S>,
	outputs: number,
): Promise<INodeExecutionData[][]> {
	const items = ctx.getInputData();
	const name = ctx.getNodeParameter('operation', 0) as string;
	const operation = operations[name];
	const errorOutput = (ctx.getNodeParameter('options', 0, {}) as IDataObject).errorOutput === true;
	const routes = Array.from({ length: outputs }, (): INodeExecutionData[] => []);
	let opened: OpenedStore<S> | undefined;
	for (let i = 0; i < items.length; i++) {
		try {
			if (operation === undefined) {
				throw new GuardError('config', `Operation "${name}" is not one this node has (${Object.keys(operations).join(', ')}).`);
			}
			opened ??= await open(ctx, false);
			const [current, [output, item]] = await runRefreshing(ctx, operation, open, opened, items[i], i);
			opened = current;
			routes[output].push(item);
		} catch (e) {
			const guardError = e instanceof GuardError ? e : new GuardError('config', String((e as Error)?.message ?? e));
			// A node that throws under "continue" has n8n pass its input on
			// through the first output, which runs the step: never throw
			// then. The item goes to the last output: the node's own Error
			// output; else n8n moves an item whose json is only error and
			// details to its error output (an item.error would make it
			// replace that json with the message alone); under "continue
			// (regular output)" it stays on the last output, which does not
			// run the step either.
			// An upgrade to make fails the execution even with the node's
			// own Error output: no retry can pass until it is made.
			if ((!errorOutput || guardError.kind === 'upgrade') && !ctx.continueOnFail()) {
				throw new NodeOperationError(ctx.getNode(), guardError.message, { itemIndex: i, description: descriptionOf(guardError) });
			}
			const details: IDataObject = { status: guardError.kind, httpStatus: guardError.httpStatus };
			if (guardError.retryAfter !== undefined) details.retryAfter = guardError.retryAfter;
			routes[routes.length - 1].push({ json: { error: guardError.message, details }, pairedItem: { item: i } });
		}
	}
	return routes;
}

/**
 * runRefreshing runs operation on item i with the store opened earlier. A
 * store read from its credential a while ago that fails to connect or is
 * refused: the credential may have changed since. It is read again, and the
 * item tried once more when it did.
 */
async function runRefreshing<S>(
	ctx: IExecuteFunctions,
	operation: Operation<S>,
	open: StoreOpener<S>,
	opened: OpenedStore<S>,
	item: INodeExecutionData,
	i: number,
): Promise<[OpenedStore<S>, Routed]> {
	let failure: unknown;
	try {
		return [opened, await operation(ctx, opened.store, item, i)];
	} catch (e) {
		failure = e;
	}
	const refreshable = failure instanceof GuardError && (failure.kind === 'credential' || failure.kind === 'unavailable');
	if (!opened.cached || !refreshable) throw failure;
	const again = await open(ctx, true);
	if (again.digest === opened.digest) throw failure;
	return [again, await operation(ctx, again.store, item, i)];
}

// What the execution's error view shows under the message.
function descriptionOf(e: GuardError): string {
	switch (e.kind) {
		case 'rejected':
			return 'The delivery cannot be guarded: answer it 400; a retry will not help.';
		case 'unavailable':
			return "The store did not answer: answer 503 with Retry-After, and the provider's retry goes through.";
		case 'upgrade':
			return 'The workflow was saved with an earlier version of the package: make the change the message names; nothing was reserved.';
		default:
			return "The node's setup needs fixing (its credential, its store or its settings); nothing was reserved.";
	}
}
