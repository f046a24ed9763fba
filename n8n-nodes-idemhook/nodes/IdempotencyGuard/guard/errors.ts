/**
 * What went wrong, for the answer a workflow gives: an item on the node's error
 * output has the message as json.error, and json.details.status (the kind) and
 * json.details.httpStatus.
 * - rejected: the delivery cannot be keyed (an empty body): 400, a retry will not help;
 * - unavailable: the store did not answer: 503 with Retry-After, a retry will;
 * - credential, schema, config: the workflow's setup is wrong: 500, fix it and the
 *   provider's retries go through;
 * - upgrade: the node was saved by an earlier package that worked otherwise
 *   (n8n-nodes-idemhook 0.1.0's PostgreSQL store): the execution fails, whatever
 *   the Error Output option, with the message naming the fix.
 * In every case nothing was reserved and the business step must not run.
 */
export type GuardErrorKind = 'rejected' | 'unavailable' | 'credential' | 'schema' | 'config' | 'upgrade';

export class GuardError extends Error {
	constructor(
		readonly kind: GuardErrorKind,
		message: string,
		/** Seconds, for an unavailable store or a lease in progress. */
		readonly retryAfter?: number,
		/** The HTTP status to answer when it is not the kind's (keysvc's own 4xx). */
		private readonly status?: number,
	) {
		super(message);
		this.name = 'GuardError';
	}

	get httpStatus(): number {
		if (this.status !== undefined) return this.status;
		switch (this.kind) {
			case 'rejected':
				return 400;
			case 'unavailable':
				return 503;
			default:
				return 500;
		}
	}
}
