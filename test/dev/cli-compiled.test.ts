/**
 * The compiled `haru` (scripts/build-cli.js, run by `npm ci`): `bin/haru.js` runs dist/haru.js while its
 * sources are unchanged and the TypeScript through tsx once one changes; the compiled file finds the folders
 * beside the sources (migrations), and prints the version. Both ways also run through a bin link named `haru`
 * (what `npm link`, `npm i -g` and `npx` put on PATH). Runs on a copy of the tree so the build and the edit touch
 * nothing here.
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase, type TestDatabase } from '../../db/testing';
import { ROOT } from './support';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

let tree: string;
let probe: string;
let binLink: string;
let db: TestDatabase;

const settle =
  (resolve: (run: Run) => void) =>
  (err: Error | null, stdout: string, stderr: string): void =>
    resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr });

/** `node -r probe bin/haru.js ...args` in the copy; the probe prints to stderr which way the command ran. */
const haru = (args: string[], env: NodeJS.ProcessEnv = {}): Promise<Run> =>
  new Promise((resolve) => {
    execFile(
      process.execPath,
      ['-r', probe, path.join(tree, 'bin', 'haru.js'), ...args],
      { cwd: tree, env: { ...process.env, ...env }, timeout: 60_000 },
      settle(resolve),
    );
  });

/**
 * `haru ...args` run the way a shell runs npm's bin link: the symlink `<tmp>/bin/haru` -> the copy's
 * bin/haru.js, executed through its `#!/usr/bin/env node` line, so `process.argv[1]` is `.../bin/haru`.
 */
const haruThroughLink = (args: string[]): Promise<Run> =>
  new Promise((resolve) => {
    const PATH = [path.dirname(process.execPath), process.env.PATH].join(path.delimiter);
    execFile(
      binLink,
      args,
      { cwd: os.tmpdir(), env: { ...process.env, PATH, NODE_OPTIONS: `-r ${probe}` }, timeout: 60_000 },
      settle(resolve),
    );
  });

const ranWith = (run: Run) => /haru-ran-with:(\w+)/.exec(run.stderr)?.[1];

beforeAll(async () => {
  tree = mkdtempSync(path.join(os.tmpdir(), 'haru-compiled-'));
  const files = execFileSync('git', ['ls-files', '-co', '--exclude-standard', '-z'], { cwd: ROOT })
    .toString()
    .split('\0')
    .filter((f) => f && !f.startsWith('dist/'));
  execFileSync('sh', ['-c', `tar -c --null -T - -f - | tar -x -C "${tree}"`], {
    cwd: ROOT,
    input: files.join('\0'),
    maxBuffer: 1 << 30,
  });
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(tree, 'node_modules'));
  mkdirSync(path.join(tree, 'link-bin'));
  binLink = path.join(tree, 'link-bin', 'haru');
  symlinkSync(path.join(tree, 'bin', 'haru.js'), binLink);
  probe = path.join(tree, 'probe.js');
  writeFileSync(
    probe,
    `process.on('exit', () => process.stderr.write('haru-ran-with:' + (Object.keys(require.cache).some((f) => f.endsWith('dist/haru.js')) ? 'dist' : 'tsx') + '\\n'));\n`,
  );
  execFileSync(process.execPath, [path.join(tree, 'scripts', 'build-cli.js')], { cwd: tree, stdio: 'ignore' });
  db = await createTestDatabase({ migrated: false });
}, 120_000);
afterAll(async () => {
  await db?.drop();
  if (tree) rmSync(tree, { recursive: true, force: true });
});

it('prints the version of package.json with --version, from the compiled file', async () => {
  const run = await haru(['--version']);
  const { version } = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
  expect([run.code, run.stdout.trim(), ranWith(run)]).toEqual([0, version, 'dist']);
});

it('runs through a bin link named haru (npm link, npx), from the compiled file', async () => {
  const run = await haruThroughLink(['--version']);
  const { version } = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
  expect([run.code, run.stdout.trim(), ranWith(run)]).toEqual([0, version, 'dist']);
  const help = await haruThroughLink(['fleet', '--help']);
  expect([help.code, ranWith(help)]).toEqual([0, 'dist']);
  expect(help.stdout).toContain('status');
});

it('applies the migrations from the compiled file (folders resolve beside the sources, not dist/)', async () => {
  const run = await haru(['db', 'migrate'], { DATABASE_URL: db.url });
  expect([run.code, ranWith(run), run.stderr.replace(/haru-ran-with:\w+\n/, '')]).toEqual([0, 'dist', '']);
  // The seed writes to the tables the migrations made.
  const seed = await haru(['db', 'seed', '--config', 'examples/dev.layout.json', '--json'], { DATABASE_URL: db.url });
  expect([seed.code, (JSON.parse(seed.stdout) as { ok: boolean }).ok]).toEqual([0, true]);
});

it('keeps running the compiled file for a command whose sources are unchanged while another command changed', async () => {
  // cli/commands/sim.ts is `haru sim`'s alone: neither the program nor `haru fleet` executes it.
  const source = path.join(tree, 'cli', 'commands', 'sim.ts');
  const later = new Date(Date.now() + 5_000);
  utimesSync(source, later, later);
  const runs = await Promise.all([
    haru(['--server', 'http://127.0.0.1:9', 'fleet', '--help']),
    haru(['--version']),
    haru(['sim', '--help']),
    haru(['help', 'fleet']),
  ]);
  expect(runs.map((run) => [run.code, ranWith(run)])).toEqual([
    [0, 'dist'],
    [0, 'dist'],
    [0, 'tsx'],
    [0, 'tsx'],
  ]);
});

it('runs the sources through tsx once a source the build read has changed', async () => {
  const source = path.join(tree, 'cli', 'commands', 'fleet.ts');
  const later = new Date(Date.now() + 5_000);
  utimesSync(source, later, later);
  const run = await haru(['fleet', '--help']);
  expect([run.code, ranWith(run)]).toEqual([0, 'tsx']);
  expect(run.stdout).toContain('status');
  // The same through the bin link: the sources run as the command, not only as a module loaded for tests.
  const linked = await haruThroughLink(['fleet', '--help']);
  expect([linked.code, ranWith(linked)]).toEqual([0, 'tsx']);
  expect(linked.stdout).toContain('status');
});
