'use strict';
/**
 * Which project folder may import which: the table of docs/architecture.md §2.2, as data. eslint.config.mjs
 * turns every row into an `import-x/no-restricted-paths` zone (resolved paths, so the depth of a file or the
 * spelling of its import cannot slip past), and test/dependency-direction.test.ts checks that this table and
 * the document's say the same and that a forbidden import fails lint.
 *
 * A row: `may` (folders it imports freely), `typeOnly` (folders it imports as `import type` only, fenced by
 * `no-restricted-imports` in eslint.config.mjs), `only` (a folder it may import some files of).
 * Harness folders import anything, and so do the tests beside the code (`*.test.ts`).
 */
const path = require('node:path');

const DEPENDENCY_DIRECTION = {
  'schemas/': { may: [] },
  'lib/': { may: [] },
  'core/': { may: ['schemas/'] },
  'clients/': { may: ['schemas/', 'lib/'] },
  'db/': { may: ['schemas/', 'core/', 'lib/'] },
  'drivers/': { may: ['schemas/'] },
  'temporal/': { may: ['schemas/'] },
  'workflows/': { may: ['schemas/', 'core/'], typeOnly: ['activities/'] },
  'activities/': { may: ['schemas/', 'core/', 'lib/', 'clients/', 'db/', 'drivers/'] },
  'api/': {
    may: ['schemas/', 'core/', 'lib/', 'clients/', 'db/', 'temporal/'],
    only: { 'workflows/': ['definitions.ts', 'start-options.ts'] },
  },
  'workers/': {
    may: ['schemas/', 'core/', 'lib/', 'clients/', 'db/', 'drivers/', 'temporal/', 'activities/', 'workflows/'],
  },
  'supervisor/': { may: ['schemas/', 'lib/'] },
  'sim/': { may: ['schemas/', 'supervisor/'] },
  'deploy/gpu-host/': { may: ['schemas/', 'lib/', 'supervisor/'] },
  'deploy/route-intent/': { may: ['schemas/'] },
};

/** Composition roots and harnesses: they import anything. */
const HARNESS_FOLDERS = ['cli/', 'bench/', 'test/', 'scripts/', 'bin/'];

/** Files that are harnesses wherever they sit. */
const HARNESS_FILES = ['**/*.test.ts'];

const topOf = (folder) => `${folder.split('/')[0]}/`;
const PROJECT_FOLDERS = [...new Set([...Object.keys(DEPENDENCY_DIRECTION).map(topOf), ...HARNESS_FOLDERS])];

/** The `import-x/no-restricted-paths` zones of every row, with paths absolute under `root`. */
function restrictedPathZones(root) {
  const abs = (folder) => path.join(root, folder);
  const zones = [];
  for (const [folder, row] of Object.entries(DEPENDENCY_DIRECTION)) {
    const only = row.only ?? {};
    const allowed = new Set([topOf(folder), ...row.may, ...(row.typeOnly ?? []), ...Object.keys(only)]);
    const may = row.may.length ? row.may.join(', ') : 'no project folder';
    const message = `${folder} may import ${may} (docs/architecture.md §2.2).`;
    const from = PROJECT_FOLDERS.filter((f) => !allowed.has(f));
    if (from.length) zones.push({ target: abs(folder), from: from.map(abs), message });
    for (const [other, files] of Object.entries(only)) {
      zones.push({
        target: abs(folder),
        from: abs(other),
        except: files.map((f) => `./${f}`),
        message: `${folder} may import only ${files.map((f) => other + f).join(', ')} of ${other} (docs/architecture.md §2.2).`,
      });
    }
  }
  return zones;
}

/** `no-restricted-imports` patterns for a row's type-only folders (any depth of `../`). */
function typeOnlyPatterns(folder) {
  return (DEPENDENCY_DIRECTION[folder].typeOnly ?? []).map((other) => ({
    regex: `^(\\.\\./)+${other.slice(0, -1)}(/|$)`,
    allowTypeImports: true,
    message: `${folder} imports ${other} as \`import type\` only (docs/architecture.md §2.2).`,
  }));
}

module.exports = { DEPENDENCY_DIRECTION, HARNESS_FOLDERS, HARNESS_FILES, restrictedPathZones, typeOnlyPatterns };
