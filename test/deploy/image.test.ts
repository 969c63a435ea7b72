/**
 * The control plane's image (the repository's Dockerfile: `haru api`, `haru worker`, the `haru` command). No
 * Docker engine runs here, so the Dockerfile is linted by the real hadolint and its stages are read: a
 * dependency stage with npm, a runtime stage without npm's cache, a Node base pinned to a release of the major
 * the package runs on, a numeric non-root user that Kubernetes' runAsNonRoot can check, and the `haru`
 * entrypoint; every file it copies exists and the tags it documents are the ones the Kubernetes manifests use.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describeWithTools, HADOLINT } from '../support/tools';

const ROOT = path.resolve(__dirname, '../..');
const DOCKERFILE = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
/** Instructions with their continuation lines joined, comments dropped. */
const instructions = DOCKERFILE.replace(/\\\n\s*/g, ' ')
  .split('\n')
  .filter((l) => /^[A-Z]+\s/.test(l))
  .map((l) => l.trim());
/** The instructions of each stage, after its FROM. */
const stages = instructions.reduce<string[][]>((all, l) => {
  if (l.startsWith('FROM ')) all.push([l]);
  else all.at(-1)?.push(l);
  return all;
}, []);
const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  version: string;
  engines: { node: string };
};

describeWithTools('Dockerfile: hadolint', [HADOLINT], () => {
  it('passes hadolint with no finding at any level', () => {
    const run = spawnSync('hadolint', ['--no-color', path.join(ROOT, 'Dockerfile')], { encoding: 'utf8' });
    expect({ status: run.status, out: run.stdout + run.stderr }).toEqual({ status: 0, out: '' });
  });

  it('is what hadolint checks: a root user or an unpinned package install would be found', () => {
    const worse = DOCKERFILE.replace('# hadolint ignore=DL3008\n', '').replace(/^USER .*$/m, 'USER root');
    const run = spawnSync('hadolint', ['--no-color', '-'], { input: worse, encoding: 'utf8' });
    expect(run.status).toBe(1);
    expect(run.stdout).toContain('DL3002'); // last USER should not be root
    expect(run.stdout).toContain('DL3008'); // pin versions in apt-get install
  });
});

describe('Dockerfile', () => {
  const base = /^ARG NODE_IMAGE=(\S+)$/m.exec(DOCKERFILE)?.[1] ?? '';

  it('builds on a Node release of the major the package runs on, pinned by tag (a digest may be given)', () => {
    const [, major] = /^node:(\d+)\.\d+\.\d+-bookworm-slim$/.exec(base) ?? [];
    expect(major).toBe(/^>=(\d+)\./.exec(pkg.engines.node)?.[1]);
    expect(stages.map((s) => s[0])).toEqual(['FROM ${NODE_IMAGE} AS deps', 'FROM ${NODE_IMAGE}']);
    expect(DOCKERFILE).toContain('--build-arg NODE_IMAGE=node:');
    expect(DOCKERFILE).toContain('@sha256:');
  });

  it('installs production dependencies only in the first stage; the image gets node_modules, not npm’s cache', () => {
    const [deps, runtime] = stages;
    expect(deps).toContain('RUN npm ci --omit=dev --no-audit --no-fund');
    // The postinstall script runs during `npm ci`: it is there before.
    expect(deps!.indexOf('COPY scripts ./scripts')).toBeLessThan(
      deps!.indexOf('RUN npm ci --omit=dev --no-audit --no-fund'),
    );
    expect(deps).toContain('ENV HARU_SKIP_TEMPORAL_INSTALL=1');
    expect(runtime!.filter((l) => /\bnpm\b/.test(l))).toEqual([]);
    expect(runtime).toContain('COPY --from=deps /app/node_modules ./node_modules');
    expect(runtime!.find((l) => l.startsWith('RUN node scripts/build-cli.js'))).toBeDefined();
  });

  it('runs `haru` as uid and gid 10001, never root, with the code owned by root', () => {
    const [, runtime] = stages;
    expect(runtime!.filter((l) => l.startsWith('USER '))).toEqual(['USER 10001:10001']);
    expect(runtime!.at(-3)).toBe('USER 10001:10001'); // nothing after it runs as root
    const setup = runtime!.find((l) => l.includes('useradd'))!;
    expect(setup).toContain('groupadd --system --gid 10001 haru');
    expect(setup).toContain('useradd --system --uid 10001 --gid 10001');
    // Only the state folder (the compose stack's certificates volume) is the user's.
    expect(setup).toContain('chown -R 10001:10001 /app/.haru');
    expect(setup).not.toMatch(/chown -R \S+ \/app(\s|$)/);
  });

  it('starts `haru`: the command chooses the process (`api`, `worker`, …), and `--help` without one', () => {
    expect(instructions.at(-2)).toBe('ENTRYPOINT ["node", "bin/haru.js"]');
    expect(instructions.at(-1)).toBe('CMD ["--help"]');
    expect(instructions).toContain('WORKDIR /app');
  });

  it('copies only files that exist', () => {
    const sources = instructions
      .filter((l) => l.startsWith('COPY ') && !l.includes('--from='))
      .flatMap((l) => l.split(/\s+/).slice(1, -1));
    expect(sources.length).toBeGreaterThan(0);
    for (const source of sources) expect([source, existsSync(path.join(ROOT, source))]).toEqual([source, true]);
  });

  it('documents the tags: the package version and the commit; the manifests run the version', () => {
    expect(DOCKERFILE).toContain(`-t haru:$(node -p 'require("./package.json").version')`);
    expect(DOCKERFILE).toContain('-t haru:$(git rev-parse --short=12 HEAD)');
    const readme = readFileSync(path.join(ROOT, 'deploy/kubernetes/README.md'), 'utf8');
    expect(readme).toContain('haru:<version>');
    expect(readme).toContain('haru:<commit>');
    expect(readFileSync(path.join(ROOT, 'deploy/kubernetes/kustomization.yaml'), 'utf8')).toContain(
      `newTag: ${pkg.version}`,
    );
  });
});
