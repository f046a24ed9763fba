/**
 * The outputs of the guard's operations: a decision routes an item, the
 * others pass it on; with the Error Output option, errors leave by an
 * output of the node's own, last. n8n evaluates it in the editor as an
 * expression over the parameters (as its Switch node does), so that the
 * canvas draws the outputs the settings give: it must read nothing but its
 * argument.
 */
export const guardOutputs = (parameters: { operation?: string; options?: { errorOutput?: boolean } }) => {
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
	if (parameters.options?.errorOutput === true) {
		outputs.push({ type: 'main', displayName: 'Error' });
	}
	return outputs;
};

/** The outputs expression of a node whose outputs are outputsOf($parameter). */
export function outputsExpression(outputsOf: (parameters: never) => unknown): `={{${string}}}` {
	return `={{(${outputsOf})($parameter)}}`;
}
