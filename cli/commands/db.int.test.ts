import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { testLayout } from '../../db/fixtures';
import { createTestDatabase, type TestDatabase } from '../../db/testing';

/** `haru db …` run as a real child process, the way an operator runs it. */

const root = path.resolve(__dirname, '..', '..');
const devLayout = path.join(root, 'examples', 'dev.layout.json');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function haru(args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [path.join(root, 'bin', 'haru.js'), ...args],
      { cwd: root, env: { ...process.env, ...env }, timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

let dir: string;
let seeded: TestDatabase;
let empty: TestDatabase;
beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'haru-cli-db-'));
  [seeded, empty] = await Promise.all([createTestDatabase(), createTestDatabase({ migrated: false })]);
});
afterAll(async () => {
  await Promise.all([seeded?.drop(), empty?.drop()]);
  rmSync(dir, { recursive: true, force: true });
});

const file = (name: string, content: unknown) => {
  const target = path.join(dir, name);
  writeFileSync(target, typeof content === 'string' ? content : JSON.stringify(content));
  return target;
};
const envFor = (t: TestDatabase) => ({ DATABASE_URL: t.url, HARU_STATE_DIR: dir });

describe('haru db', () => {
  it('migrate creates the schema in an empty database', async () => {
    const run = await haru(['db', 'migrate'], envFor(empty));
    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(run.stdout).toMatch(/migrations applied/);
    expect(await empty.store.fleets.list()).toEqual([]);
  });

  it('seed refuses an invalid layout with every problem by JSON path, exit 2, writing nothing', async () => {
    const bad = testLayout({ fleet: 'bad' }) as ReturnType<typeof testLayout> & { typo?: boolean };
    bad.domains[1]!.slug = 'east';
    bad.domains[0]!.supervisorUrl = 'ftp://host';
    bad.typo = true;
    const badFile = file('bad.json', bad);
    const [text, json, notJson] = await Promise.all([
      haru(['db', 'seed', '--config', badFile], envFor(seeded)),
      haru(['db', 'seed', '--config', badFile, '--json'], envFor(seeded)),
      haru(['db', 'seed', '--config', file('broken.json', '{"fleet": ')], envFor(seeded)),
    ]);
    expect(text.code).toBe(2);
    expect(text.stderr).toContain('$.domains[1].slug: duplicate domain slug "east"');
    expect(text.stderr).toContain('$.domains[0].supervisorUrl: must be an absolute http:// or https:// URL');
    expect(text.stderr).toContain('$.typo: unknown key');
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stdout)).toMatchObject({
      ok: false,
      problems: expect.arrayContaining([{ path: '$.typo', message: 'unknown key' }]),
    });
    expect(notJson.code).toBe(2);
    expect(notJson.stderr).toMatch(/broken\.json is not valid JSON/);
    expect(await seeded.store.fleets.list()).toEqual([]);
  });

  it('seed rejects a DATABASE_URL that is not a postgres URL, naming the variable', async () => {
    const run = await haru(['db', 'seed', '--config', devLayout], {
      DATABASE_URL: 'mysql://localhost/haru',
      HARU_STATE_DIR: dir,
    });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/DATABASE_URL: must be a postgres/);
  });

  it('seed applies the dev layout, reports what it did, and is idempotent; prune refuses the active domain', async () => {
    const first = await haru(['db', 'seed', '--config', devLayout, '--json'], envFor(seeded));
    expect(first.code).toBe(0);
    const report = JSON.parse(first.stdout);
    expect(report).toMatchObject({ ok: true, fleetSlug: 'dev', updated: [], pruned: [] });
    expect(report.created).toEqual(
      expect.arrayContaining(['fleet dev', 'domain dev/east', 'slot dev/west/gpu1/training']),
    );
    const fleet = (await seeded.store.fleets.snapshot('dev'))!;
    expect(fleet.domains.find((d) => d.isActive)?.slug).toBe('east');

    const again = await haru(['db', 'seed', '--config', devLayout], envFor(seeded));
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/0 created, 0 updated, 0 pruned, \d+ unchanged, 0 left/);

    const westOnly = JSON.parse(readFileSync(devLayout, 'utf8'));
    westOnly.domains = westOnly.domains.filter((d: { slug: string }) => d.slug === 'west');
    westOnly.fleet.activeDomain = 'west';
    const refused = await haru(['db', 'seed', '--prune', '--config', file('west.json', westOnly)], envFor(seeded));
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("cannot prune domain dev/east: it is the fleet's active domain");
    const refusedJson = await haru(
      ['db', 'seed', '--prune', '--json', '--config', file('west.json', westOnly)],
      envFor(seeded),
    );
    expect([refusedJson.code, JSON.parse(refusedJson.stdout)]).toEqual([
      2,
      { ok: false, refused: ["cannot prune domain dev/east: it is the fleet's active domain"] },
    ]);
    expect(await seeded.store.fleets.snapshot('dev')).toEqual(fleet);
  });

  it('finishes the seed and exits 0 when stdout is closed before it prints (`haru db seed | head -0`)', async () => {
    const child = spawn(process.execPath, [path.join(root, 'bin', 'haru.js'), 'db', 'seed', '--config', devLayout], {
      cwd: root,
      env: { ...process.env, ...envFor(seeded) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.destroy(); // the reader is gone before the first line
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect([code, stderr]).toEqual([0, '']);
  });
});
