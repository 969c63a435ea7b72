import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { createTestDatabase, type TestDatabase } from '../../db/testing';
import { loadSupervisorConfig } from '../../supervisor/config';

/**
 * `haru layout convert` on files of the original project's format, run as a child process the way an operator
 * runs it, and the converted layout seeded with `haru db seed` into a real database.
 */

const root = path.resolve(__dirname, '..', '..');
const fixture = (name: string) => path.join(root, 'test', 'fixtures', 'original', name);

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function haru(args: string[], env: Record<string, string> = {}): Promise<Run> {
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
let db: TestDatabase;
beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'haru-cli-layout-'));
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
  rmSync(dir, { recursive: true, force: true });
});

describe('haru layout convert', () => {
  it('converts the original fleet layout, lists every change on stderr, and haru db seed applies the result', async () => {
    const out = path.join(dir, 'fleet.json');
    const run = await haru(['layout', 'convert', fixture('fleet.json'), '-o', out]);
    expect(run).toMatchObject({ code: 0, stdout: '' });
    const lines = run.stderr.split('\n');
    expect(lines[0]).toMatch(/^converted the original fleet layout .*fleet\.json to .*fleet\.json, with \d+ changes:$/);
    expect(lines).toEqual(
      expect.arrayContaining([
        '  renamed: $.slug -> $.fleet.slug',
        '  renamed: $.policy.switchActiveTimeoutMs -> $.fleet.policy.commitTimeoutMs',
        "  filled: $.fleet.policy.heartbeatStaleMs = 30000, the original's default (Haru's is 5000)",
        '  merged: $.domains[0].placement.accelerator and acceleratorCount -> $.domains[0].placement.accelerators = "L4:2"',
        expect.stringMatching(/^ {2}not carried over: \$\.domains\[1\] \(west\) is a skypilot domain/),
      ]),
    );

    const seed = await haru(['db', 'seed', '--config', out, '--json'], { DATABASE_URL: db.url, HARU_STATE_DIR: dir });
    expect(seed.code).toBe(0);
    expect(JSON.parse(seed.stdout)).toMatchObject({ ok: true, fleetSlug: 'chat' });
    const fleet = (await db.store.fleets.snapshot('chat'))!;
    expect(fleet.domains.find((d) => d.isActive)?.slug).toBe('east');
    expect(fleet.policy).toMatchObject({ autoFailover: true, commitTimeoutMs: 15_000, heartbeatStaleMs: 30_000 });
    expect(fleet.domains.map((d) => [d.slug, d.placement.accelerators])).toEqual([
      ['east', 'L4:2'],
      ['west', 'L4:1'],
    ]);
  });

  it('writes YAML for a .yaml target, and to stdout without -o', async () => {
    const yamlOut = path.join(dir, 'fleet.yaml');
    const [toYaml, toStdout] = await Promise.all([
      haru(['layout', 'convert', fixture('fleet.json'), '-o', yamlOut]),
      haru(['layout', 'convert', fixture('fleet.json')]),
    ]);
    expect([toYaml.code, toStdout.code]).toEqual([0, 0]);
    expect(YAML.parse(readFileSync(yamlOut, 'utf8'))).toEqual(JSON.parse(toStdout.stdout));
  });

  it('converts the original supervisor config into one the supervisor loads', async () => {
    const run = await haru(['layout', 'convert', fixture('supervisor.json')]);
    expect(run.code).toBe(0);
    expect(run.stderr).toContain('  moved: $.slots[1] (training, GPU 0) -> $.training[0], without its "kind"');
    const config = loadSupervisorConfig(run.stdout, () => '');
    expect(config.inference.map((s) => s.gpuIndex)).toEqual([0, 1]);
  });

  it('exits 2 naming the field for a file it cannot convert, and writes nothing', async () => {
    const original = JSON.parse(readFileSync(fixture('fleet.json'), 'utf8'));
    delete original.domains[1].supervisorUrl;
    const bad = path.join(dir, 'no-supervisor.json');
    writeFileSync(bad, JSON.stringify(original));
    const out = path.join(dir, 'never.json');
    const run = await haru(['layout', 'convert', bad, '-o', out]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('$.domains[1].supervisorUrl: domain "west" has no supervisorUrl');
    expect(existsSync(out)).toBe(false);
  });

  it("exits 2 for a file already in Haru's format, or of neither kind", async () => {
    const [haruLayout, other] = await Promise.all([
      haru(['layout', 'convert', path.join(root, 'examples', 'dev.layout.json')]),
      haru(['layout', 'convert', path.join(root, 'package.json')]),
    ]);
    expect([haruLayout.code, haruLayout.stderr]).toEqual([2, expect.stringMatching(/already in Haru's format/)]);
    expect([other.code, other.stderr]).toEqual([
      2,
      expect.stringMatching(/neither a fleet layout .* nor a supervisor config/),
    ]);
  });

  it('haru db seed refuses the original layout itself, pointing at the converter', async () => {
    const run = await haru(['db', 'seed', '--config', fixture('fleet.json')], {
      DATABASE_URL: db.url,
      HARU_STATE_DIR: dir,
    });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`\`haru layout convert ${fixture('fleet.json')} -o <new file>\``);
  });
});
