#!/usr/bin/env node
/**
 * `npm run lint:cycles`: madge's import graph of the project (settings in .madgerc: TypeScript, type-only imports
 * left out since they are erased, node_modules, .haru and dist skipped) must hold no cycle but the drizzle
 * tables' foreign keys (docs/architecture.md §2.2). Prints each other cycle and exits 1.
 */
'use strict';
const { readFileSync } = require('node:fs');
const path = require('node:path');
const madge = require('madge');

const ROOT = path.resolve(__dirname, '..');
/** Tables that reference each other for foreign keys and relations: the one cycle allowed. */
const ALLOWED = [['db/schema/domains.ts', 'db/schema/fleets.ts']];

const key = (cycle) => [...cycle].sort().join(' <-> ');

async function main() {
  const config = JSON.parse(readFileSync(path.join(ROOT, '.madgerc'), 'utf8'));
  const graph = await madge(ROOT, { ...config, baseDir: ROOT });
  const allowed = new Set(ALLOWED.map(key));
  const cycles = graph.circular();
  const forbidden = cycles.filter((cycle) => !allowed.has(key(cycle)));
  for (const cycle of forbidden) console.error(`import cycle: ${[...cycle, cycle[0]].join(' -> ')}`);
  if (forbidden.length > 0) {
    console.error(`${forbidden.length} import cycle(s) beyond the drizzle foreign keys (docs/architecture.md §2.2)`);
    process.exit(1);
  }
  console.log(`no import cycle in ${Object.keys(graph.obj()).length} files but the drizzle foreign keys`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
