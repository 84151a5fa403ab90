// Syntax check of every .bicep and .bicepparam file under infra/ with tree-sitter-bicep (wasm,
// no native build and no Bicep compiler needed). Prints each error with its position; exits 1 if
// any file has one. Usage: node scripts/check-bicep.mjs [FILE ...]
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Parser, Language } from 'web-tree-sitter';

function walk(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return walk(p);
    return /\.bicep(param)?$/.test(name) ? [p] : [];
  });
}

const files = process.argv.length > 2 ? process.argv.slice(2) : walk('infra');
await Parser.init();
const bicep = await Language.load(readFileSync('node_modules/tree-sitter-bicep/tree-sitter-bicep.wasm'));
const parser = new Parser();
parser.setLanguage(bicep);

let bad = 0;
for (const file of files) {
  let text = readFileSync(file, 'utf8');
  if (file.endsWith('.bicepparam')) {
    // tree-sitter-bicep knows Bicep, not the parameters file's untyped `param NAME = value`,
    // which has the syntax of a `var` declaration: check it as one (same length, same positions).
    text = text.replace(/^(\s*)param(\s+\w+\s*=)/gm, '$1var  $2');
  }
  const tree = parser.parse(text);
  const problems = [];
  const visit = (node) => {
    if (node.type === 'ERROR' || node.isMissing) {
      const { row, column } = node.startPosition;
      problems.push(`${file}:${row + 1}:${column + 1}: ${node.isMissing ? 'missing ' + node.type : 'syntax error near ' + JSON.stringify(node.text.slice(0, 40))}`);
      return;
    }
    for (const child of node.children) visit(child);
  };
  visit(tree.rootNode);
  if (problems.length) {
    bad++;
    problems.forEach((p) => console.error(p));
  }
}
console.log(`bicep syntax: ${files.length - bad} of ${files.length} files parse cleanly`);
process.exit(bad ? 1 : 0);
