// After tsc: writes the key spec's functions and the signature check's first
// step as CommonJS modules beside the node (their one sources are
// templates/code-node/key-spec.js and signature-prepare.js, which the
// generated Code nodes run too) and copies the node's icon and codex file.
'use strict';
const fs = require('fs');
const path = require('path');

const root = path.join(__dirname, '..');
const nodeDir = path.join(root, 'dist', 'nodes', 'IdempotencyGuard');
const source = path.join(root, '..', 'templates', 'code-node', 'key-spec.js');

const exported = ['deriveFor', 'headerValue', 'isMultipart', 'eventType', 'receiptValue', 'EMPTY_BODY'];
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

// signature-prepare.js is a Code node script: its constants, its functions,
// then the loop over n8n's items. The functions between the two become a
// function of the provider and the tolerance, which returns prepare().
const prepareSource = path.join(root, '..', 'templates', 'code-node', 'signature-prepare.js');
const prepareScript = fs.readFileSync(prepareSource, 'utf8');
const constants = /^const PROVIDER = .*;\nconst TOLERANCE_SECONDS = .*;\n/m;
const loop = /^const out = \[\];\n/m;
const head = prepareScript.search(constants);
const tail = prepareScript.search(loop);
if (head < 0 || tail < head || !/^function prepare\(headers, buf\)/m.test(prepareScript)) {
	throw new Error(`${prepareSource} no longer has its constants, prepare(headers, buf) and the items loop in that order: update scripts/build.js and nodes/IdempotencyGuard/signaturespec.d.ts`);
}
const functions = prepareScript.slice(head, tail).replace(constants, '');
fs.writeFileSync(
	path.join(nodeDir, 'signaturespec.js'),
	"'use strict';\n// Built from templates/code-node/signature-prepare.js by scripts/build.js: do not edit.\n\n" +
		'function signaturePreparer(PROVIDER, TOLERANCE_SECONDS) {\n' +
		functions +
		'return prepare;\n}\n\nmodule.exports = { signaturePreparer };\n',
);
for (const file of ['IdempotencyGuard.node.json', 'idempotencyGuard.svg']) {
	fs.copyFileSync(path.join(root, 'nodes', 'IdempotencyGuard', file), path.join(nodeDir, file));
}
fs.copyFileSync(path.join(root, 'credentials', 'idemhook.svg'), path.join(root, 'dist', 'credentials', 'idemhook.svg'));
