/**
 * The compiled `haru` (scripts/build-cli.js, run by `npm ci`): `bin/haru.js` runs dist/haru.js while its
 * sources are unchanged and the TypeScript through tsx once one changes; the compiled file finds the folders
 * beside the sources (migrations), and prints the version. Runs on a copy of the tree so the build and the
 * edit touch nothing here.
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
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
let db: TestDatabase;

/** `node -r probe bin/haru.js ...args` in the copy; the probe prints to stderr which way the command ran. */
const haru = (args: string[], env: NodeJS.ProcessEnv = {}): Promise<Run> =>
  new Promise((resolve) => {
    execFile(
      process.execPath,
      ['-r', probe, path.join(tree, 'bin', 'haru.js'), ...args],
      { cwd: tree, env: { ...process.env, ...env }, timeout: 60_000 },
      (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
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

it('applies the migrations from the compiled file (folders resolve beside the sources, not dist/)', async () => {
  const run = await haru(['db', 'migrate'], { DATABASE_URL: db.url });
  expect([run.code, ranWith(run), run.stderr.replace(/haru-ran-with:\w+\n/, '')]).toEqual([0, 'dist', '']);
  // The seed writes to the tables the migrations made.
  const seed = await haru(['db', 'seed', '--config', 'examples/dev.layout.json', '--json'], { DATABASE_URL: db.url });
  expect([seed.code, (JSON.parse(seed.stdout) as { ok: boolean }).ok]).toEqual([0, true]);
});

it('runs the sources through tsx once a source the build read has changed', async () => {
  const source = path.join(tree, 'cli', 'commands', 'fleet.ts');
  const later = new Date(Date.now() + 5_000);
  utimesSync(source, later, later);
  const run = await haru(['fleet', '--help']);
  expect([run.code, ranWith(run)]).toEqual([0, 'tsx']);
  expect(run.stdout).toContain('status');
});
