#!/usr/bin/env node
// The `haru` command. dist/haru.js (built by `postinstall`, scripts/build-cli.js) while every source it was
// built from is unchanged, else the TypeScript sources through tsx: an edited tree never runs stale code.
// This file runs the command itself, so it works under any name it is started by: `node bin/haru.js`, or the
// bin link `haru` that `npm link`, `npm i -g` and `npx` create.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const dist = path.join(__dirname, '..', 'dist');

function compiledIsCurrent() {
  try {
    const { builtAt, inputs } = JSON.parse(fs.readFileSync(path.join(dist, 'haru.inputs.json'), 'utf8'));
    if (fs.statSync(path.join(dist, 'haru.js')).mtimeMs !== builtAt) return false;
    const root = path.join(__dirname, '..');
    for (const [file, mtimeMs] of Object.entries(inputs)) {
      if (fs.statSync(path.join(root, file)).mtimeMs !== mtimeMs) return false;
    }
    return true;
  } catch {
    return false; // not built, or a source is gone
  }
}

function loadCli() {
  if (compiledIsCurrent()) return require('../dist/haru.js');
  require('tsx/cjs');
  return require('../cli/main.ts');
}

void loadCli().main(process.argv);
