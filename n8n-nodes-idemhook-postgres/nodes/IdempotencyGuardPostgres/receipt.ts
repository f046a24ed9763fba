import { createHmac, timingSafeEqual } from 'crypto';
import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import { cachedCredential } from './guard/credentials';
import { GuardError } from './guard/errors';
import { slackChallenge } from './guard/key';
import { deriveFor, EMPTY_BODY, headerValue, isMultipart, receiptValue } from './guard/keyspec';
import { providers } from './guard/providers';
import { signaturePreparer } from './signaturespec';
import { identifierPattern, inboxStatements, reservedWords } from './statements';
import { explain, type PostgresStore } from './transport/postgres';

/** What the inbox receipt reads from a delivery, as the node's parameters set it. */
export interface ReceiptOptions {
	/** The provider whose signature is checked first; '' for none. */
	signature: string;
	toleranceSeconds: number;
	preset: string;
	scope: string;
	binaryProperty: string;
	/** The account of a delivery that names none. */
	defaultAccount: string;
	/** Where the event type and the account are: a header, else a path into the body. */
	typeHeader: string;
	typePath: string[];
	accountHeader: string;
	accountPath: string[];
	/** Request headers kept with the receipt, in lower case. */
	keptHeaders: string[];
	/** The inbox's schema prefix: '' or "schema.". */
	schemaPrefix: string;
	/** How long the worker a receipt starts holds the drain. */
	drainLeaseSeconds: number;
}

/** A delivery the receipt refuses, and the answer it gets: 401 for its signature, 400 for an empty body. */
export interface Rejection {
	statusCode: 400 | 401;
	code: string;
	error: string;
}

/** A saved receipt: the inbox row, whether this delivery inserted it, and whether it starts a worker. */
export interface Saved {
	key: string;
	account: string;
	eventType: string;
	id: string | null;
	state: string | null;
	new: boolean;
	wake: boolean;
}

/** Slack's Events API URL check: answered with its challenge, saved nowhere. */
export interface URLCheck {
	challenge: string;
}

/** The outputs of Save Inbox Receipt, in order; Start Worker only with that option. */
export const RECEIVED = 0;
export const REJECTED = 1;
export const START_WORKER = 2;

/**
 * routeOf sends a receipt to its output: a rejection to Rejected; a new
 * receipt that found no worker draining to Start Worker, when the node has
 * that output, with drain for the worker it starts; any other to Received,
 * and Slack's URL check there too, with status url_verification and its
 * challenge.
 */
export function routeOf(got: Saved | Rejection | URLCheck, workerOutput: boolean): [number, IDataObject] {
	if ('statusCode' in got) return [REJECTED, { status: 'rejected', ...got }];
	if ('challenge' in got) return [RECEIVED, { status: 'url_verification', challenge: got.challenge }];
	if (workerOutput && got.new && got.wake) return [START_WORKER, { ...got, drain: true }];
	return [RECEIVED, { ...got }];
}

/** The signing secret, read from the node's Crypto credential; fresh re-reads it. */
export type SecretSource = (fresh: boolean) => Promise<{ secret: string; cached: boolean }>;

/**
 * receive checks the delivery's signature, builds its receipt key by the key
 * spec and saves it in the inbox with pgsql.Inbox.ReceiveAndWake, the
 * statement the generated receiver runs: the same code as the receiver's
 * Code node (templates/code-node), in n8n's own process. A forged or
 * unkeyable delivery is a Rejection and saves nothing; a failed save throws
 * a GuardError. Where the delivery is Slack's (its signature or its preset),
 * Slack's URL check is a URLCheck, after the signature check, and saves
 * nothing.
 */
export async function receive(
	ctx: IExecuteFunctions,
	item: INodeExecutionData,
	index: number,
	opts: ReceiptOptions,
	store: Pick<PostgresStore, 'pool' | 'credentialName'>,
	secretOf: SecretSource,
): Promise<Saved | Rejection | URLCheck> {
	const headers = item.json.headers;
	const binary = item.binary ?? {};
	let form = null;
	if (isMultipart(headerValue(headers, 'content-type'))) {
		const files: Buffer[] = [];
		for (const name of Object.keys(binary)) files.push(await ctx.helpers.getBinaryDataBuffer(index, name));
		form = { fields: item.json.body, files };
	}
	const body = !form && binary[opts.binaryProperty] ? await ctx.helpers.getBinaryDataBuffer(index, opts.binaryProperty) : Buffer.alloc(0);

	if (opts.signature !== '') {
		const refused = await checkSignature(opts, headers, body, secretOf);
		if (refused !== undefined) return refused;
	}
	if (opts.signature === 'slack' || opts.preset === 'slack') {
		const challenge = slackChallenge(body);
		if (challenge !== undefined) return { challenge };
	}
	const k = deriveFor(opts.preset, headers, body, opts.scope, form);
	if (k.error !== undefined) {
		if (k.error.startsWith(EMPTY_BODY)) return { statusCode: 400, code: 'empty_body', error: k.error };
		throw new GuardError('config', `${k.error}. Nothing was saved.`);
	}
	const eventType = receiptValue(headers, body, opts.typeHeader, opts.typePath) ?? '';
	const account = receiptValue(headers, body, opts.accountHeader, opts.accountPath) ?? opts.defaultAccount;
	const kept: Record<string, string> = {};
	for (const h of opts.keptHeaders) {
		const v = headerValue(headers, h);
		if (v !== '') kept[h] = v;
	}
	let res;
	try {
		res = await store.pool.query(inboxStatements.receiveAndWake(opts.schemaPrefix, opts.drainLeaseSeconds), [
			account,
			k.key,
			eventType,
			body.toString('base64'),
			JSON.stringify(kept),
		]);
	} catch (e) {
		throw explain(e, { table: 'inbox_events', credentialName: store.credentialName }, 'Nothing was saved.');
	}
	// A concurrent duplicate may see no row (see the statement): it is one.
	const row = res.rows[0] as { id: string; state: string; new: boolean; wake: boolean } | undefined;
	return {
		key: k.key,
		account,
		eventType,
		id: row?.id ?? null,
		state: row?.state ?? null,
		new: row?.new === true,
		wake: row?.wake === true,
	};
}

const NO_MATCH = 'no signature matches the body and secret';

// checkSignature runs the provider's check: the Code node's first step
// (templates/code-node/signature-prepare.js), then the HMAC with the
// credential's secret, compared in constant time with each signature sent.
// A secret read a while ago that matches nothing is read again once: it may
// have been rotated.
async function checkSignature(opts: ReceiptOptions, headers: unknown, body: Buffer, secretOf: SecretSource): Promise<Rejection | undefined> {
	const encoding = providers.find((p) => p.value === opts.signature)?.hmac;
	if (!encoding) {
		throw new GuardError('config', `Signature Check "${opts.signature}" is not a provider the node can verify (${providers.filter((p) => p.hmac).map((p) => p.value).join(', ')}). Nothing was saved.`);
	}
	const prepared = signaturePreparer(opts.signature, opts.toleranceSeconds)(headers, body);
	if (prepared.code !== '') return { statusCode: 401, code: prepared.code, error: prepared.reason };
	for (let fresh = false; ; fresh = true) {
		const { secret, cached } = await secretOf(fresh);
		const expected = Buffer.from(createHmac('sha256', secret).update(prepared.payload, 'utf8').digest(encoding));
		if (prepared.candidates.some((c) => sameBytes(Buffer.from(c), expected))) return undefined;
		if (fresh || !cached) return { statusCode: 401, code: 'invalid_signature', error: NO_MATCH };
	}
}

function sameBytes(a: Buffer, b: Buffer): boolean {
	return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * cryptoSecret reads the signing secret from the node's n8n Crypto
 * credential (its HMAC Secret, as n8n's Crypto node uses it), at most
 * CREDENTIAL_TTL_MS ago unless fresh.
 */
export function cryptoSecret(ctx: IExecuteFunctions): SecretSource {
	return async (fresh) => {
		const read = await cachedCredential(
			ctx,
			'crypto',
			fresh,
			(name, reason) => `The Crypto credential "${name}" could not be read (${reason}): choose the one that holds the provider's signing secret. Nothing was saved.`,
			(data, name) => {
				const secret = typeof data.hmacSecret === 'string' ? data.hmacSecret : '';
				if (secret === '') {
					throw new GuardError('credential', `The Crypto credential "${name}" has no Hmac Secret: set it to the provider's signing secret. Nothing was saved.`);
				}
				return secret;
			},
		);
		return { secret: read.value, cached: read.cached };
	};
}

/** schemaPrefixOf validates the inbox's schema (ParseTable's rule for a part): '' or "schema.". */
export function schemaPrefixOf(schema: string): string {
	if (schema === '') return '';
	if (!new RegExp(identifierPattern).test(schema) || reservedWords.has(schema)) {
		throw new GuardError(
			'config',
			`Inbox Schema "${schema}" is not a schema name idemhook uses: lower-case letters, digits and '_' (not starting with a digit, no reserved word), or empty for the search path's. Nothing was saved.`,
		);
	}
	return schema + '.';
}

/** pathOf splits a dot-separated path into the body ("data.object.account"); '' is no path. */
export function pathOf(path: string): string[] {
	return path === '' ? [] : path.split('.');
}
