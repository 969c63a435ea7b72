#!/usr/bin/env node
/**
 * Installs the Debian tools a test tier runs for real when they are missing, as the test run installs its PyPI
 * tools (test/support/python-tools.ts): `node scripts/install-test-tools.js <unit|integration|system>`, which
 * scripts/test-tier.js runs before each tier.
 * As root with apt-get: one `apt-get update`, then one `apt-get install --no-install-recommends` of the missing
 * packages, with no service started (policy-rc.d; under systemd the new units are also disabled). Tools already
 * there cost one probe each and nothing is installed. Not root, no apt-get, or a failed install: it says why and
 * exits 0, and the tests needing the tool are skipped with the reason in their name (test/support/tools.ts).
 */
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');

const say = (msg) => process.stderr.write(`[haru test tools] ${msg}\n`);
const ok = (file, args) => spawnSync(file, args, { stdio: 'ignore', timeout: 30_000 }).status === 0;
const found = (command) => ok('sh', ['-c', `command -v "${command}"`]);
const isDebInstalled = (pkg) =>
  spawnSync('dpkg-query', ['-W', '-f=${Status}', pkg], { encoding: 'utf8' }).stdout === 'install ok installed';

/** Debian's own python3 makes virtualenvs only with python3-venv; any other python3 brings venv with it. */
function pythonVenvWorks() {
  const python = spawnSync('sh', ['-c', 'readlink -f "$(command -v python3)"'], { encoding: 'utf8' }).stdout.trim();
  if (!python) return false;
  return !python.startsWith('/usr/bin/') || !found('dpkg-query') || isDebInstalled('python3-venv');
}

/** Each tool (after the test files that run it): the tiers it serves, its Debian package, whether it is there,
 * and the services its package would start. */
const TOOLS = [
  { name: 'openssl', pkg: 'openssl', tiers: ['unit', 'integration', 'system'], present: () => found('openssl') },
  // test/temporal/tls.test.ts: the TLS terminator in front of Temporal.
  { name: 'haproxy', pkg: 'haproxy', tiers: ['integration'], present: () => found('haproxy'), services: ['haproxy'] },
  // test/api/ui.e2e.test.ts drives /usr/bin/chromium with puppeteer-core.
  { name: 'chromium', pkg: 'chromium', tiers: ['system'], present: () => fs.existsSync('/usr/bin/chromium') },
  // The PyPI tools' virtualenvs (schemathesis, the OpenAI SDK, SkyPilot, hadolint, Compose v2).
  { name: 'python3 venv', pkg: 'python3-venv', tiers: ['integration', 'system'], present: pythonVenvWorks },
  // test/deploy/gateway.test.ts, route-intent-nginx.test.ts.
  { name: 'nginx', pkg: 'nginx', tiers: ['system'], present: () => found('nginx'), services: ['nginx'] },
  // test/deploy/observability.test.ts: promtool checks and unit-tests the alert rules.
  {
    name: 'promtool',
    pkg: 'prometheus',
    tiers: ['system'],
    present: () => found('promtool'),
    services: ['prometheus'],
  },
  // test/supervisor/trainer-firewall.test.ts: the host kit's rules that keep trainers off vLLM's ports.
  { name: 'nft', pkg: 'nftables', tiers: ['integration'], present: () => found('nft'), services: ['nftables'] },
  // test/deploy/systemd.test.ts: systemd-analyze verify.
  { name: 'systemd-analyze', pkg: 'systemd', tiers: ['system'], present: () => found('systemd-analyze') },
];

const POLICY_RC = '/usr/sbin/policy-rc.d';

/** Runs `body` with invoke-rc.d refusing every service start (exit 101), unless a policy is already there. */
function withoutServiceStarts(body) {
  if (fs.existsSync(POLICY_RC)) return body();
  const policy = '#!/bin/sh\n# written by haru scripts/install-test-tools.js while it installs\nexit 101\n';
  fs.writeFileSync(POLICY_RC, policy, { mode: 0o755 });
  try {
    return body();
  } finally {
    fs.rmSync(POLICY_RC, { force: true });
  }
}

function apt(args) {
  const r = spawnSync('apt-get', ['-o', 'DPkg::Lock::Timeout=300', ...args], {
    encoding: 'utf8',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    timeout: 20 * 60_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  if (r.status !== 0)
    throw new Error(`apt-get ${args.join(' ')} failed: ${(r.stderr || r.error?.message || '').trim().slice(-500)}`);
}

/** Installs what `tier`'s tests run and is missing (see the top of this file); exits 2 on an unknown tier. */
function installTestTools(tier) {
  const tiers = [...new Set(TOOLS.flatMap((t) => t.tiers))];
  if (!tiers.includes(tier)) {
    say(`usage: install-test-tools.js <${tiers.join('|')}>`);
    process.exit(2);
  }
  const missing = TOOLS.filter((t) => t.tiers.includes(tier) && !t.present());
  if (missing.length === 0) return;
  const list = missing.map((t) => `${t.name} (${t.pkg})`).join(', ');
  const why = process.getuid?.() !== 0 ? 'not root' : !found('apt-get') || !found('dpkg-query') ? 'no apt-get' : null;
  if (why) {
    say(
      `missing ${list}: ${why}, so their tests will be skipped (apt-get install ${missing.map((t) => t.pkg).join(' ')})`,
    );
    return;
  }
  const startedAt = Date.now();
  say(`installing ${list} with apt-get ...`);
  try {
    withoutServiceStarts(() => {
      apt(['update', '-qq']);
      apt(['install', '-y', '-qq', '--no-install-recommends', ...missing.map((t) => t.pkg)]);
    });
  } catch (err) {
    say(`${err.message}\nthe tests that need ${list} will be skipped`);
    return;
  }
  // Under systemd, the package enabled its units: a test machine runs no nginx, haproxy or prometheus daemon.
  const services = missing.flatMap((t) => t.services ?? []);
  if (services.length > 0 && fs.existsSync('/run/systemd/system')) ok('systemctl', ['disable', '--now', ...services]);
  const still = missing.filter((t) => !t.present()).map((t) => t.name);
  say(
    `installed in ${((Date.now() - startedAt) / 1000).toFixed(1)} s${still.length ? `; still missing: ${still.join(', ')}` : ''}`,
  );
}

if (require.main === module) installTestTools(process.argv[2]);
module.exports = { installTestTools };
