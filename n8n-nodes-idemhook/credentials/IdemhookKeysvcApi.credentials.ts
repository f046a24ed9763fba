import type { ICredentialDataDecryptedObject, ICredentialTestRequest, ICredentialType, IHttpRequestOptions, INodeProperties } from 'n8n-workflow';

/**
 * keysvc, idemhook's key service: its base URL and a token with the guard
 * scope (reserve, lease, complete and release, nothing else) or the admin
 * scope.
 */
export class IdemhookKeysvcApi implements ICredentialType {
	name = 'idemhookKeysvcApi';

	displayName = 'Idemhook Keysvc API';

	icon = { light: 'file:idemhook.svg', dark: 'file:idemhook.dark.svg' } as const;

	documentationUrl = 'https://github.com/idemhook/idemhook/blob/main/docs/keysvc.md#tokens';

	properties: INodeProperties[] = [
		{
			displayName: 'URL',
			name: 'url',
			type: 'string',
			default: '',
			placeholder: 'https://keysvc.example.com',
			description: "Keysvc's base URL as n8n reaches it (HTTPS on a public address)",
			required: true,
		},
		{
			displayName: 'Token',
			name: 'token',
			type: 'string',
			typeOptions: { password: true },
			default: '',
			description: 'A keysvc token with the guard scope (or admin)',
			required: true,
		},
	];

	// A function, not a generic authenticate: n8n evaluates a generic one's
	// '=Bearer {{$credentials.token}}' as an expression on every call
	// (0.4-1.5 ms measured); a function is called as it is.
	async authenticate(credentials: ICredentialDataDecryptedObject, requestOptions: IHttpRequestOptions): Promise<IHttpRequestOptions> {
		return { ...requestOptions, headers: { ...requestOptions.headers, Authorization: `Bearer ${String(credentials.token ?? '')}` } };
	}

	// GET /v1/token?scope=guard answers 200 when the token may do what the
	// node does, 403 naming the scope it lacks, 401 for a token keysvc does
	// not know.
	test: ICredentialTestRequest = {
		request: { baseURL: '={{$credentials.url}}', url: '/v1/token', qs: { scope: 'guard' }, method: 'GET' },
		rules: [
			{
				type: 'responseCode',
				properties: { value: 401, message: 'Keysvc does not know this token: check it, and the tokens file keysvc reads' },
			},
			{
				type: 'responseCode',
				properties: {
					value: 403,
					message: 'This token lacks the guard scope: the Idempotency Guard needs a keysvc token with the guard scope (or admin)',
				},
			},
		],
	};
}
