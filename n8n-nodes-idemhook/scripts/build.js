// After tsc: writes the key spec's functions as a CommonJS module beside the
// node (the one source is templates/code-node/key-spec.js, which the
// generated Code node runs too) and copies the node's icon and codex file.
'use strict';
const fs = require('fs');
const path = require('path');

const root = path.join(__dirname, '..');
const nodeDir = path.join(root, 'dist', 'nodes', 'IdempotencyGuard');
const source = path.join(root, '..', 'templates', 'code-node', 'key-spec.js');

const exported = ['deriveFor', 'headerValue', 'isMultipart', 'eventType', 'EMPTY_BODY'];
const spec = fs.readFileSync(source, 'utf8');
for (const name of exported) {
	if (!new RegExp(`^(function|const) ${name}\\b`, 'm').test(spec)) {
		throw new Error(`${source} no longer defines ${name}: update nodes/IdempotencyGuard/keyspec.d.ts and this list`);
	}
}
fs.mkdirSync(nodeDir, { recursive: true });
fs.writeFileSync(
	path.join(nodeDir, 'keyspec.js'),
	"'use strict';\n// Built from templates/code-node/key-spec.js by scripts/build.js: do not edit.\n" +
		"const crypto = require('crypto');\n\n" +
		spec +
		`\nmodule.exports = { ${exported.join(', ')} };\n`,
);
for (const file of ['IdempotencyGuard.node.json', 'idempotencyGuard.svg']) {
	fs.copyFileSync(path.join(root, 'nodes', 'IdempotencyGuard', file), path.join(nodeDir, file));
}
fs.copyFileSync(path.join(root, 'credentials', 'idemhook.svg'), path.join(root, 'dist', 'credentials', 'idemhook.svg'));
