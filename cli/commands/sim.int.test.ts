/**
 * `haru sim domain` and `haru sim kill` as an operator runs them: a real `haru` process, real signals.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadSupervisorClientTls } from '../../clients/supervisor-tls';
import { createSupervisorClient } from '../../activities/supervisor-client';
import { FailureType } from '../../schemas/failures';
import { isAlive } from '../../sim/gpu-state';
import { createTestPki } from '../../test/support/pki';
import { findMarkedPids } from '../../sim/processes';
import { freePort } from '../../test/support/ports';

const HARU = path.resolve(__dirname, '../../bin/haru.js');
let dir: string;
const children: ChildProcess[] = [];

beforeAll(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'haru-sim-cli-'));
});
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

async function writeLayout(name: string): Promise<{ file: string; supervisorPort: number }> {
  const supervisorPort = await freePort();
  const layout = {
    fleet: { slug: 'cli', activeDomain: 'solo' },
    domains: [
      {
        slug: 'solo',
        supervisorUrl: `http://127.0.0.1:${supervisorPort}`,
        slots: [
          {
            kind: 'inference',
            gpuIndex: 0,
            models: [{ name: 'tiny-1b', servingUrl: `http://127.0.0.1:${await freePort()}` }],
          },
          { kind: 'training', gpuIndex: 0, command: ['node', 'sim/trainer.js'], checkpointDir: 'ckpt' },
        ],
      },
    ],
  };
  const file = path.join(dir, `${name}.layout.json`);
  writeFileSync(file, JSON.stringify(layout));
  return { file, supervisorPort };
}

function haru(args: string[], env: NodeJS.ProcessEnv = {}) {
  const child = spawn(process.execPath, [HARU, ...args], {
    env: { ...process.env, HARU_SUPERVISOR_TOKEN: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const printed = (pattern: RegExp) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (pattern.test(output)) resolve();
      };
      child.stdout!.on('data', check);
      void exited.then(() =>
        pattern.test(output) ? resolve() : reject(new Error(`exited without ${pattern}:\n${output}`)),
      );
    });
  return { child, exited, printed, output: () => output };
}

const marker = (stateDir: string) =>
  (JSON.parse(readFileSync(path.join(stateDir, 'sim.json'), 'utf8')) as { marker: string }).marker;

/** Every pid of the running domain: its children (sim.json) and the training run the supervisor started. */
async function domainPids(stateDir: string, supervisorPort: number): Promise<number[]> {
  const state = JSON.parse(readFileSync(path.join(stateDir, 'sim.json'), 'utf8')) as { pids: number[] };
  const status = (await (await fetch(`http://127.0.0.1:${supervisorPort}/v1/status`)).json()) as {
    training: { pids: number[] }[];
  };
  return [...state.pids, ...status.training.flatMap((t) => t.pids)];
}

describe('haru sim', () => {
  it('runs a standby domain until SIGTERM and leaves no process behind', async () => {
    const { file, supervisorPort } = await writeLayout('term');
    const stateDir = path.join(dir, 'term');
    const run = haru(['sim', 'domain', '--layout', file, '--domain', 'solo', '--state-dir', stateDir, '--standby']);
    await run.printed(/nvidia-smi: HARU_SIM_GPU_STATE=/);
    expect(run.output()).toContain('simulated domain solo (standby)');
    const pids = await domainPids(stateDir, supervisorPort);
    expect(pids).toHaveLength(3); // fake vLLM, supervisor, trainer
    expect(pids.every(isAlive)).toBe(true);
    const domainMarker = marker(stateDir);

    run.child.kill('SIGTERM');
    expect(await run.exited).toBe(0);
    expect(pids.filter(isAlive)).toEqual([]);
    expect(findMarkedPids(domainMarker)).toEqual([]); // helpers (tsx's esbuild service) included
    expect(run.output()).toContain('stopped');
  });

  it('`haru sim kill` SIGKILLs a running domain, and the domain command exits non-zero', async () => {
    const { file, supervisorPort } = await writeLayout('kill');
    const stateDir = path.join(dir, 'kill');
    const run = haru(['sim', 'domain', '--layout', file, '--domain', 'solo', '--state-dir', stateDir, '--standby']);
    await run.printed(/nvidia-smi: HARU_SIM_GPU_STATE=/);
    const pids = await domainPids(stateDir, supervisorPort);
    const domainMarker = marker(stateDir);

    const kill = haru(['sim', 'kill', '--state-dir', stateDir]);
    expect(await kill.exited).toBe(0);
    expect(kill.output()).toMatch(/killed \d+ processes/);
    expect(pids.filter(isAlive)).toEqual([]);
    expect(findMarkedPids(domainMarker)).toEqual([]);
    expect(await run.exited).toBe(1);
    expect(run.output()).toContain('supervisor exited; domain stopped');
  });

  it('serves its supervisor over HTTPS with a certificate, as standby, to a worker trusting the CA', async () => {
    const pki = createTestPki();
    chmodSync(pki.server.key, 0o600);
    const { file, supervisorPort } = await writeLayout('tls');
    const stateDir = path.join(dir, 'tls');
    const run = haru(['sim', 'domain', '--layout', file, '--domain', 'solo', '--state-dir', stateDir, '--standby'], {
      HARU_SUPERVISOR_TOKEN: 'sim-tls-token',
      HARU_SUPERVISOR_TLS_CERT_FILE: pki.server.cert,
      HARU_SUPERVISOR_TLS_KEY_FILE: pki.server.key,
    });
    await run.printed(/nvidia-smi: HARU_SIM_GPU_STATE=/);
    expect(run.output()).toContain(`supervisor https://127.0.0.1:${supervisorPort}`);
    const client = createSupervisorClient({
      token: 'sim-tls-token',
      tls: loadSupervisorClientTls({ HARU_SUPERVISOR_CA_FILE: pki.ca }),
    });
    const status = await client.status({ slug: 'solo', supervisorUrl: `https://localhost:${supervisorPort}` });
    expect(status.models.map((m) => m.state)).toEqual(['asleep']); // the standby set-up went through TLS too
    run.child.kill('SIGTERM');
    expect(await run.exited).toBe(0);
  });

  it('requires client certificates (mTLS) like the real supervisor: a worker without one gets a named refusal', async () => {
    const pki = createTestPki();
    chmodSync(pki.server.key, 0o600);
    const { file, supervisorPort } = await writeLayout('mtls');
    const stateDir = path.join(dir, 'mtls');
    const tlsEnv = {
      HARU_SUPERVISOR_TOKEN: 'sim-mtls-token',
      HARU_SUPERVISOR_TLS_CERT_FILE: pki.server.cert,
      HARU_SUPERVISOR_TLS_KEY_FILE: pki.server.key,
      HARU_SUPERVISOR_TLS_CLIENT_CA_FILE: pki.ca,
    };
    // Its own start-up checks need a client certificate too; without one it says which variables to set.
    const refused = haru(['sim', 'domain', '--layout', file, '--domain', 'solo', '--state-dir', stateDir], tlsEnv);
    expect(await refused.exited).not.toBe(0);
    expect(refused.output()).toMatch(/HARU_SUPERVISOR_CLIENT_CERT_FILE and HARU_SUPERVISOR_CLIENT_KEY_FILE/);

    const clientCert = {
      HARU_SUPERVISOR_CLIENT_CERT_FILE: pki.client.cert,
      HARU_SUPERVISOR_CLIENT_KEY_FILE: pki.client.key,
    };
    const run = haru(['sim', 'domain', '--layout', file, '--domain', 'solo', '--state-dir', stateDir, '--standby'], {
      ...tlsEnv,
      ...clientCert,
    });
    await run.printed(/nvidia-smi: HARU_SIM_GPU_STATE=/);
    const target = { slug: 'solo', supervisorUrl: `https://localhost:${supervisorPort}` };
    const client = (env: Parameters<typeof loadSupervisorClientTls>[0]) =>
      createSupervisorClient({ token: 'sim-mtls-token', tls: loadSupervisorClientTls(env) });

    const withCert = client({ HARU_SUPERVISOR_CA_FILE: pki.ca, ...clientCert });
    expect((await withCert.status(target)).models.map((m) => m.state)).toEqual(['asleep']);

    const without = await client({ HARU_SUPERVISOR_CA_FILE: pki.ca })
      .status(target)
      .catch((err: unknown) => err);
    expect(without).toMatchObject({ type: FailureType.Unauthorized, nonRetryable: true });
    expect((without as Error).message).toMatch(
      /HTTP 401 \(unauthorized: this supervisor requires a client certificate \(mTLS\) and none was presented: set HARU_SUPERVISOR_CLIENT_CERT_FILE and HARU_SUPERVISOR_CLIENT_KEY_FILE/,
    );
    run.child.kill('SIGTERM');
    expect(await run.exited).toBe(0);
  });

  it('refuses a bad layout with every problem listed (exit 2)', async () => {
    const file = path.join(dir, 'bad.layout.json');
    writeFileSync(file, JSON.stringify({ fleet: { slug: 'Bad Slug', activeDomain: 'x' }, domains: [] }));
    const run = haru(['sim', 'domain', '--layout', file, '--domain', 'x']);
    expect(await run.exited).toBe(2);
    expect(run.output()).toMatch(/invalid layout[\s\S]*fleet\.slug[\s\S]*domains/);
  });

  it('runs `haru supervisor`, which refuses a bad config with exit 2', async () => {
    const run = haru(['supervisor'], { HARU_SUPERVISOR_CONFIG: '{"inference": [{"gpuIndex": -1}]}' });
    expect(await run.exited).toBe(2);
    expect(run.output()).toMatch(
      /^haru: invalid supervisor config[\s\S]*inference\.0\.gpuIndex[\s\S]*inference\.0\.models/,
    );
  });
});
