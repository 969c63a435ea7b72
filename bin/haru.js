#!/usr/bin/env node
// The `haru` command. dist/haru.js (built by `postinstall`, scripts/build-cli.js) while every source the run
// executes (the program's, the named command's) is as it was built, else the TypeScript sources through tsx:
// an edited tree never runs stale code, and an edit to one command does not slow down the others.
// This file runs the command itself, so it works under any name it is started by: `node bin/haru.js`, or the
// bin link `haru` that `npm link`, `npm i -g` and `npx` create.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const dist = path.join(__dirname, '..', 'dist');

/**
 * The sources a run of `args` executes, from what the build recorded: the program's own and those of every
 * command a word names (`fleet` in `haru --server URL fleet status`; a word that is a command's name
 * elsewhere only adds sources to check); `help` and `completion` load every command, so every source counts.
 */
function sourcesFor(args, inputs, commands) {
  if (!commands || args.includes('help') || args.includes('completion')) return Object.keys(inputs);
  const files = new Set(commands.main);
  for (const arg of args)
    if (arg !== 'main' && Object.hasOwn(commands, arg)) commands[arg].forEach((f) => files.add(f));
  return [...files];
}

/** Whether dist/haru.js was built from the sources of this run as they are now. */
function compiledIsCurrent(args) {
  try {
    const { builtAt, inputs, commands } = JSON.parse(fs.readFileSync(path.join(dist, 'haru.inputs.json'), 'utf8'));
    if (fs.statSync(path.join(dist, 'haru.js')).mtimeMs !== builtAt) return false;
    const root = path.join(__dirname, '..');
    for (const file of sourcesFor(args, inputs, commands)) {
      if (fs.statSync(path.join(root, file)).mtimeMs !== inputs[file]) return false;
    }
    return true;
  } catch {
    return false; // not built, or a source is gone
  }
}

function loadCli() {
  if (compiledIsCurrent(process.argv.slice(2))) return require('../dist/haru.js');
  require('tsx/cjs');
  return require('../cli/main.ts');
}

void loadCli().main(process.argv);
