/**
 * The test tiers cannot drift (jest.config.js): every test file is in exactly one tier, and no unit test
 * reaches, through the modules it loads, the Temporal dev server, the test database, a worker process or a
 * simulated GPU host; such a test belongs to the integration or system tier (rename it `*.int.test.ts`).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..');
const TIERS = ['unit', 'integration', 'system'] as const;

/** Servers and processes the unit tier never starts: the code that starts or reaches them. */
const SERVER_ONLY = [
  /\bTestWorkflowEnvironment\.create/, // the testing library's Temporal server
  /\bfunction startTemporalDevServer\b/, // cli/temporal-dev-server.ts
  /\bprocess\.env\.TEMPORAL_TEST_ADDRESS\b/, // the run's dev server (test/global-setup.ts)
  /\bprocess\.env\.HARU_TEST_(DATABASE_URL|TEMPLATE_DB|WORKFLOW_BUNDLE)\b/, // db/testing.ts, the workflow bundle
  /\bfunction startWorkerProcess\b/, // test/support/worker-process.ts
  /\bfunction startSimDomain\b/, // sim/domain.ts: a simulated GPU host's supervisor, engines and trainers
];
/** Comments name these freely; only code counts. */
const withoutComments = (source: string) => source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|\s)\/\/.*$/gm, '$1');

function listTests(project: string): string[] {
  const jest = require.resolve('jest/bin/jest');
  const args = [jest, '--listTests', '--json', '--selectProjects', project];
  const run = spawnSync(process.execPath, args, { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  if (run.status !== 0) throw new Error(`jest --listTests failed: ${run.stderr}`);
  const json = run.stdout.split('\n').find((line) => line.startsWith('['));
  return (JSON.parse(json ?? '[]') as string[]).map((file) => path.relative(ROOT, file)).sort();
}

function testFilesOnDisk(dir = ROOT): string[] {
  const skip = new Set(['node_modules', '.git', '.haru', 'dist', '.stryker-tmp']);
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (skip.has(name)) return [];
    if (statSync(full).isDirectory()) return testFilesOnDisk(full);
    return name.endsWith('.test.ts') ? [path.relative(ROOT, full)] : [];
  });
}

// Imports that run: `import type` and `export type` are erased, so they load nothing.
const RUNTIME_IMPORT =
  /^(?!\s*(?:import|export)\s+type\b).*?(?:\bfrom\s*|\bimport\s*\(\s*|\brequire\s*\(\s*|^\s*import\s+)['"](\.{1,2}\/[^'"]+)['"]/gm;

function resolveLocal(from: string, spec: string): string | null {
  const base = path.resolve(path.dirname(from), spec);
  const candidates = [base, `${base}.ts`, `${base}.js`, path.join(base, 'index.ts'), path.join(base, 'index.js')];
  return candidates.find((c) => existsSync(c) && statSync(c).isFile()) ?? null;
}

/** The first module `file` loads (itself included) that uses a server-only fixture, with the import chain. */
function reachesServer(file: string): string[] | null {
  const parent = new Map<string, string | null>([[file, null]]);
  const queue = [file];
  for (let current = queue.shift(); current; current = queue.shift()) {
    const source = readFileSync(current, 'utf8');
    if (SERVER_ONLY.some((re) => re.test(withoutComments(source)))) {
      const chain: string[] = [];
      for (let at: string | null | undefined = current; at; at = parent.get(at)) chain.unshift(path.relative(ROOT, at));
      return chain;
    }
    for (const [, spec] of source.matchAll(RUNTIME_IMPORT)) {
      const next = resolveLocal(current, spec!);
      if (next && !parent.has(next)) {
        parent.set(next, current);
        queue.push(next);
      }
    }
  }
  return null;
}

describe('test tiers', () => {
  const byTier = Object.fromEntries(TIERS.map((tier) => [tier, listTests(tier)])) as Record<
    (typeof TIERS)[number],
    string[]
  >;

  it('put every test file in exactly one tier', () => {
    const listed = TIERS.flatMap((tier) => byTier[tier]);
    expect(listed.length).toBe(new Set(listed).size);
    expect([...listed].sort()).toEqual(testFilesOnDisk().sort());
  });

  it('keep Temporal, the test database, worker processes and simulated hosts out of the unit tier', () => {
    const offenders = byTier.unit
      .map((file) => reachesServer(path.join(ROOT, file)))
      .filter((chain): chain is string[] => chain !== null)
      .map((chain) => chain.join(' -> '));
    expect(offenders).toEqual([]);
  });

  it('find a server-only fixture behind a chain of imports', () => {
    expect(reachesServer(path.join(ROOT, 'test/workflows/promotion.workflow.test.ts'))).not.toBeNull();
    expect(reachesServer(path.join(ROOT, 'db/store.int.test.ts'))?.at(-1)).toBe('db/testing.ts');
    expect(reachesServer(path.join(ROOT, 'sim/domain.int.test.ts'))?.at(-1)).toBe('sim/domain.ts');
    expect(reachesServer(path.join(ROOT, 'core/drain.test.ts'))).toBeNull();
  });
});
