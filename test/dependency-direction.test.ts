/**
 * The dependency direction cannot drift (docs/architecture.md §2.2): the table in dependency-direction.cjs, which
 * eslint.config.mjs turns into lint rules, says what the document's table says, and lint fails on an import the
 * table forbids (run on probe files through the ESLint Node API with the project's own config, in a child
 * process: ESLint loads its ESM config with import(), which jest's module system refuses).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const direction = require('../dependency-direction.cjs') as {
  DEPENDENCY_DIRECTION: Record<string, { may: string[]; typeOnly?: string[]; only?: Record<string, string[]> }>;
  HARNESS_FOLDERS: string[];
};

/** The §2.2 table: each row's folders (first column) and the folders its second column names. */
function documentedTable(): Map<string, string[]> {
  const doc = readFileSync(path.join(ROOT, 'docs/architecture.md'), 'utf8');
  const section = doc.slice(doc.indexOf('### 2.2 Dependency direction'), doc.indexOf('## 3.'));
  const folders = (cell: string) => [...cell.matchAll(/`([a-z-]+(?:\/[a-z-]+)*\/)`/g)].map((m) => m[1]!);
  const rows = new Map<string, string[]>();
  for (const line of section.split('\n')) {
    const cells = line.split('|').map((c) => c.trim());
    if (cells.length < 4 || !cells[1]!.startsWith('`')) continue;
    for (const folder of folders(cells[1]!)) rows.set(folder, cells[2] === 'anything' ? ['*'] : folders(cells[2]!));
  }
  return rows;
}

interface Probe {
  file: string;
  code: string;
}
interface ProbeResult {
  file: string;
  messages: { ruleId: string | null; message: string }[];
}

/** Lints each probe as if it were that file of the project, with eslint.config.mjs (no type-aware rules). */
function lint(probes: Probe[]): ProbeResult[] {
  const script = `
    import { ESLint } from 'eslint';
    const probes = JSON.parse(process.argv[1]);
    const eslint = new ESLint({
      cwd: process.cwd(),
      overrideConfig: {
        languageOptions: { parserOptions: { projectService: false } },
        rules: { '@typescript-eslint/no-floating-promises': 'off' },
      },
    });
    const results = [];
    for (const probe of probes) {
      const [result] = await eslint.lintText(probe.code, { filePath: probe.file });
      results.push({ file: probe.file, messages: result.messages.map((m) => ({ ruleId: m.ruleId, message: m.message })) });
    }
    process.stdout.write(JSON.stringify(results));
  `;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script, JSON.stringify(probes)], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 120_000,
  });
  if (run.status !== 0) throw new Error(`eslint failed: ${run.stderr}`);
  return JSON.parse(run.stdout) as ProbeResult[];
}

const DIRECTION_RULES = new Set(['import-x/no-restricted-paths', 'no-restricted-imports']);
const directionErrors = (result: ProbeResult) => result.messages.filter((m) => DIRECTION_RULES.has(m.ruleId ?? ''));

describe('dependency direction', () => {
  it('the lint table says what docs/architecture.md §2.2 says, row for row', () => {
    const lintTable = new Map<string, string[]>();
    for (const [folder, row] of Object.entries(direction.DEPENDENCY_DIRECTION)) {
      lintTable.set(folder, [...row.may, ...(row.typeOnly ?? []), ...Object.keys(row.only ?? {})].sort());
    }
    for (const folder of direction.HARNESS_FOLDERS) lintTable.set(folder, ['*']);
    const documented = new Map([...documentedTable()].map(([folder, may]) => [folder, [...may].sort()]));
    expect(Object.fromEntries(documented)).toEqual(Object.fromEntries(lintTable));
  });

  it('fails lint on imports §2.2 forbids, at any depth, and passes the ones it allows', () => {
    const probes: (Probe & { isForbidden: boolean })[] = [
      { file: 'core/probe.ts', code: "import '../db/store';\n", isForbidden: true },
      { file: 'core/probe.ts', code: "import '../schemas/enums';\n", isForbidden: false },
      { file: 'supervisor/gpu/probe.ts', code: "import '../../core/workflow-ids';\n", isForbidden: true },
      { file: 'api/routes/probe.ts', code: "import '../../activities/supervisor-client';\n", isForbidden: true },
      { file: 'api/routes/probe.ts', code: "import '../../clients/supervisor-client';\n", isForbidden: false },
      { file: 'api/probe.ts', code: "import '../workflows/definitions';\n", isForbidden: false },
      { file: 'api/probe.ts', code: "import '../workflows/promotion';\n", isForbidden: true },
      { file: 'activities/probe.ts', code: "import '../api/proxy/route-table';\n", isForbidden: true },
      { file: 'clients/probe.ts', code: "import '../activities/supervisor-client';\n", isForbidden: true },
      {
        file: 'workflows/probe.ts',
        code: "import type { Activities } from '../activities';\nexport type A = Activities;\n",
        isForbidden: false,
      },
      { file: 'workflows/probe.ts', code: "import '../activities';\n", isForbidden: true },
      { file: 'sim/probe.ts', code: "import '../core/workflow-ids';\n", isForbidden: true },
      { file: 'api/probe.test.ts', code: "import '../test/support/ports';\n", isForbidden: false },
    ];
    const results = lint(probes.map(({ file, code }) => ({ file: path.join(ROOT, file), code })));
    const verdicts = probes.map((probe, i) => ({
      probe: `${probe.file}: ${probe.code.split('\n')[0]}`,
      isForbidden: directionErrors(results[i]!).length > 0,
    }));
    expect(verdicts).toEqual(
      probes.map((p) => ({ probe: `${p.file}: ${p.code.split('\n')[0]}`, isForbidden: p.isForbidden })),
    );
    const zone = results[0]!.messages.find((m) => m.ruleId === 'import-x/no-restricted-paths');
    expect(zone?.message).toContain('core/ may import schemas/ (docs/architecture.md §2.2)');
  });
});
