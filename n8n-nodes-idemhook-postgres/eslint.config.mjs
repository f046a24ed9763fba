// n8n's lint config for packages that do not target n8n Cloud, with the
// three rules this package's design breaks turned off, each for its reason.
// Everything else is n8n's. The package n8n can verify, n8n-nodes-idemhook,
// runs n8n's default config unchanged (strict mode).
import { configWithoutCloudSupport } from '@n8n/node-cli/eslint';

export default [
	...configWithoutCloudSupport,
	{
		rules: {
			// It reserves in the user's own PostgreSQL, with the pg client:
			// the one runtime dependency, which self-hosted n8n installs.
			'@n8n/community-nodes/no-runtime-dependencies': 'off',
			// It connects with the user's existing n8n Postgres credential,
			// and verifies signatures with the secret of n8n's Crypto
			// credential, as n8n's own Postgres and Crypto nodes do: a
			// credential of its own would ask for the same secrets again.
			'@n8n/community-nodes/no-credential-reuse': 'off',
			'@n8n/community-nodes/valid-credential-references': 'off',
		},
	},
];
