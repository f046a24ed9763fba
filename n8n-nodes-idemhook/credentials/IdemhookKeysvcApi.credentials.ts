import type { IAuthenticateGeneric, ICredentialTestRequest, ICredentialType, INodeProperties } from 'n8n-workflow';

/** keysvc, idemhook's key service: its base URL and a token with the admin scope. */
export class IdemhookKeysvcApi implements ICredentialType {
	name = 'idemhookKeysvcApi';

	displayName = 'idemhook keysvc API';

	icon = 'file:idemhook.svg' as const;

	documentationUrl = 'https://github.com/idemhook/idemhook/blob/main/docs/keysvc.md';

	properties: INodeProperties[] = [
		{
			displayName: 'URL',
			name: 'url',
			type: 'string',
			default: 'http://127.0.0.1:8080',
			placeholder: 'http://keysvc:8080',
			description: "keysvc's base URL as n8n reaches it",
			required: true,
		},
		{
			displayName: 'Token',
			name: 'token',
			type: 'string',
			typeOptions: { password: true },
			default: '',
			description: 'A keysvc token with the admin scope (reserve, complete and release)',
			required: true,
		},
	];

	authenticate: IAuthenticateGeneric = {
		type: 'generic',
		properties: { headers: { Authorization: '=Bearer {{$credentials.token}}' } },
	};

	// GET /v1/console answers any valid token with its scope; a bad token gets 401.
	test: ICredentialTestRequest = {
		request: { baseURL: '={{$credentials.url}}', url: '/v1/console', method: 'GET' },
		rules: [
			{
				type: 'responseSuccessBody',
				properties: { key: 'token.scope', value: 'read', message: 'This token can only read: the node needs one with the admin scope' },
			},
		],
	};
}
