/**
 * `haru dev` end to end, started as a user starts it: a child process on free ports with a temporary state
 * directory. It must become ready, serve a chat completion through the OpenAI SDK, fail over when the
 * active simulated domain is killed with the command its banner prints (route revision +1, the new active
 * serving the same model), leave the completed promotion in Temporal for the `temporal` CLI, answer the
 * CLI (JSON reads; API errors as code and message), and stop everything it started on SIGINT.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import OpenAI from 'openai';
import { findTemporalCli } from '../../cli/temporal-cli';
import type { FleetSnapshot } from '../../schemas/entities';
import { routeIntentSchema, type RouteIntent } from '../../schemas/route-intent';
import {
  descendants,
  devEnv,
  type DevProcess,
  HARU,
  processesMentioning,
  ROOT,
  spawnDev,
  stillRunning,
} from './support';
import { eventually } from '../support/eventually';
import { freePort } from '../support/ports';

const run = promisify(execFile);
jest.setTimeout(300_000);

describe('haru dev, end to end', () => {
  let stateDir: string;
  let env: Awaited<ReturnType<typeof devEnv>>;
  let dev: DevProcess;
  let apiUrl: string;
  let openai: OpenAI;
  const cli = (args: string[], extra: NodeJS.ProcessEnv = {}) =>
    run(process.execPath, [HARU, ...args], {
      cwd: ROOT,
      env: { ...env, HARU_URL: apiUrl, ...extra },
      timeout: 120_000,
    }).then(
      (r) => ({ code: 0, ...r }),
      (err: { code: number; stdout: string; stderr: string }) => ({
        code: err.code,
        stdout: err.stdout,
        stderr: err.stderr,
      }),
    );
  const routeIntent = async (): Promise<RouteIntent> =>
    routeIntentSchema.parse(await (await fetch(`${apiUrl}/v1/fleets/dev/route-intent`)).json());
  /** The banner's command under `# <heading>`, continuation lines joined: what a user copies. */
  const bannerBlock = (heading: RegExp): string => {
    const lines = dev.stdout().split('\n');
    const at = lines.findIndex((l) => heading.test(l));
    if (at < 0) throw new Error(`banner has no ${heading}:\n${dev.stdout()}`);
    const block: string[] = [];
    for (let i = at + 1; lines[i]?.trim(); i++) {
      block.push(lines[i]!.trim().replace(/\\$/, '').trim());
      if (!lines[i]!.trim().endsWith('\\')) break;
    }
    return block.join(' ');
  };
  /** The banner's command under `# <heading>`: what a user copies. */
  const bannerCommand = (heading: RegExp): string => {
    const lines = dev.stdout().split('\n');
    const at = lines.findIndex((l) => heading.test(l));
    if (at < 0) throw new Error(`banner has no ${heading}:\n${dev.stdout()}`);
    return lines[at + 1]!.trim();
  };

  beforeAll(async () => {
    stateDir = mkdtempSync(path.join(os.tmpdir(), 'haru-dev-e2e-'));
    // The SDK's exporter on a port of its own: the dev worker serves it as `haru worker` does.
    env = { ...(await devEnv(stateDir)), HARU_WORKER_SDK_METRICS_PORT: String(await freePort()) };
    apiUrl = `http://127.0.0.1:${env.PORT}`;
    dev = spawnDev(env);
    const exitedEarly = dev.exited.then(({ code, signal }) => {
      throw new Error(`haru dev exited during start (${signal ?? code}):\n${dev.stdout()}\n${dev.stderr()}`);
    });
    // Readiness as an operator checks it: /readyz answers 200 (then the banner lists the commands).
    await Promise.race([
      exitedEarly,
      eventually(
        'GET /readyz to answer 200',
        async () => ((await fetch(`${apiUrl}/readyz`)).ok ? true : undefined),
        240_000,
      ),
    ]);
    await Promise.race([
      exitedEarly,
      eventually('the banner', () => (dev.stdout().includes('Ctrl-C stops everything') ? true : undefined), 240_000),
    ]);
    exitedEarly.catch(() => undefined);
    openai = new OpenAI({ baseURL: `${apiUrl}/v1`, apiKey: 'unused-without-HARU_API_TOKEN', maxRetries: 0 });
  });

  afterAll(async () => {
    if (dev && dev.child.exitCode === null && dev.child.signalCode === null) {
      dev.child.kill('SIGINT');
      await dev.exited;
    }
    rmSync(stateDir, { recursive: true, force: true });
  });

  it("prints the URLs and the commands to try, and serves both the worker's and the Temporal SDK's metrics", async () => {
    const out = dev.stdout();
    const [, workerMetrics, sdkMetrics] = /Metrics {18}worker (\S+), Temporal SDK (\S+)/.exec(out) ?? [];
    expect(sdkMetrics).toBe(`http://127.0.0.1:${env.HARU_WORKER_SDK_METRICS_PORT}/metrics`);
    expect(await (await fetch(workerMetrics!)).text()).toContain('haru_worker_activity_');
    expect(await (await fetch(sdkMetrics!)).text()).toMatch(/^temporal_\w+/m);
    expect(out).toContain(`API (OpenAI-compatible)  ${apiUrl}/v1`);
    expect(out).toContain(`Temporal Web UI          http://127.0.0.1:${env.HARU_TEMPORAL_UI_PORT}`);
    expect(bannerCommand(/# 1\. chat/)).toMatch(/^curl -s .*\/v1\/chat\/completions/);
    expect(bannerCommand(/# 3\. kill the active domain/)).toMatch(/sim kill --state-dir .*\/sim\/east$/);
    expect(bannerCommand(/# 2\. .*watch|wait for the next failover/)).toMatch(/fleet watch dev --next$/);
  });

  it('serves a chat completion through the OpenAI SDK from the active domain', async () => {
    const { data, response } = await openai.chat.completions
      .create({ model: 'qwen-0.5b', messages: [{ role: 'user', content: 'Hello from the test' }] })
      .withResponse();
    expect(data.model).toBe('qwen-0.5b');
    expect(data.choices[0]?.message.content).toEqual(expect.any(String));
    expect(data.choices[0]!.message.content!.length).toBeGreaterThan(0);
    expect(response.headers.get('x-haru-domain')).toBe('east');

    // And the banner's curl line, as printed.
    const curl = await run('sh', ['-c', `${bannerBlock(/# 1\. chat/)} -i`], { cwd: ROOT, env });
    expect(curl.stdout).toMatch(/^HTTP\/1\.1 200/);
    expect(curl.stdout).toMatch(/"model":"qwen-0\.5b"/);
  });

  it('fails over when the active domain is killed the way the banner says', async () => {
    const before = await routeIntent();
    expect(before.activeDomain?.slug).toBe('east');
    // Step 2 of the banner, in a "second terminal": it must be waiting before the kill.
    const watcher = spawn(process.execPath, [HARU, 'fleet', 'watch', 'dev', '--next'], {
      cwd: ROOT,
      env: { ...env, HARU_URL: apiUrl },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let watched = '';
    watcher.stdout.on('data', (c: Buffer) => (watched += c.toString()));
    watcher.stderr.on('data', (c: Buffer) => (watched += c.toString()));
    const watcherExit = new Promise<number | null>((resolve) => watcher.once('exit', (code) => resolve(code)));
    await eventually(
      'the watcher to wait',
      () => (watched.includes('waiting for the next operation') ? true : undefined),
      60_000,
    );

    const kill = bannerCommand(/# 3\. kill the active domain/);
    const killed = await run('sh', ['-c', kill], { cwd: ROOT, env });
    expect(killed.stdout).toMatch(/killed \d+ processes/);

    const after = await eventually(
      'the route to move to another domain',
      async () => {
        const intent = await routeIntent();
        return intent.revision > before.revision && !intent.failover.inFlight ? intent : undefined;
      },
      180_000,
    );
    expect(after.revision).toBe(before.revision + 1);
    expect(after.activeDomain?.slug).toBe('west');
    expect(after.models.map((m) => m.name)).toContain('qwen-0.5b');

    const { data, response } = await openai.chat.completions
      .create({ model: 'qwen-0.5b', messages: [{ role: 'user', content: 'Still there?' }] })
      .withResponse();
    expect(data.choices[0]!.message.content!.length).toBeGreaterThan(0);
    expect(response.headers.get('x-haru-domain')).toBe('west');

    expect(await watcherExit).toBe(0);
    expect(watched).toMatch(/promote [0-9a-f-]{36}: (running|succeeded)/);
    for (const step of ['stopTraining', 'verifyGpuReleased', 'wakeModels', 'probeModels', 'commitRouting'])
      expect(watched).toContain(step);
    expect(watched).toMatch(/^succeeded/m);
    expect(watched).toMatch(/^promote east → west \(/m);
    expect(watched).toMatch(/^routing committed \d+(\.\d+)?m?s after start$/m);
    // The killed east cannot be demoted: best effort, never a ✗ under a success.
    expect(watched).toMatch(/^demotion of east \(best effort\): /m);
    expect(watched).not.toMatch(/✗ demoteOldActive/);
  });

  it('revives the killed domain as a standby, promotes it back with --wait, and fails over again when it is killed', async () => {
    const fleet = async () => (await (await fetch(`${apiUrl}/v1/fleets/dev`)).json()) as FleetSnapshot;
    const east = async () => (await fleet()).domains.find((d) => d.slug === 'east')!;
    const revive = spawn('sh', ['-c', `exec ${bannerCommand(/# bring the killed domain back/)}`], {
      cwd: ROOT,
      env,
      stdio: 'ignore',
    });
    const revived = new Promise<number | null>((resolve) => revive.once('exit', (code) => resolve(code)));
    try {
      await eventually(
        'east to be a ready standby: asleep and training',
        async () => {
          const d = await east();
          const asleep = d.slots.filter((s) => s.kind === 'inference').every((s) => s.state === 'sleeping');
          const training = d.slots.filter((s) => s.kind === 'training').every((s) => s.state === 'training');
          return d.state === 'ready' && asleep && training ? d : undefined;
        },
        120_000,
      );
      const before = await routeIntent();
      expect(before.activeDomain?.slug).toBe('west');

      const promoted = await cli(['fleet', 'promote', 'dev', 'east', '--wait', '--reason', 'end-to-end test']);
      expect(promoted.code).toBe(0);
      // Each step live with its elapsed time, then the outcome.
      expect(promoted.stdout).toMatch(/stopTraining .*\d(\.\d+)?m?s/);
      expect(promoted.stdout).toMatch(/commitRouting .*\d(\.\d+)?m?s/);
      expect(promoted.stdout).toMatch(/^succeeded/m);
      const back = await routeIntent();
      expect({ revision: back.revision, active: back.activeDomain?.slug }).toEqual({
        revision: before.revision + 1,
        active: 'east',
      });

      // The revived domain is killable like the first time: the same banner line.
      const again = await run('sh', ['-c', bannerCommand(/# 3\. kill the active domain/)], { cwd: ROOT, env });
      expect(again.stdout).toMatch(/killed \d+ processes/);
      expect(await revived).not.toBe(0); // its supervisor died under it
      const moved = await eventually(
        'the route to move back to west',
        async () => {
          const intent = await routeIntent();
          return intent.revision > back.revision && !intent.failover.inFlight ? intent : undefined;
        },
        180_000,
      );
      expect({ revision: moved.revision, active: moved.activeDomain?.slug }).toEqual({
        revision: back.revision + 1,
        active: 'west',
      });
    } finally {
      if (revive.exitCode === null) revive.kill('SIGTERM');
      await revived;
    }
  });

  it('shows the completed promotion in `temporal workflow list`', async () => {
    const temporal = findTemporalCli(process.env.TEMPORAL_CLI);
    expect(temporal).not.toBeNull();
    const { operations } = (await (await fetch(`${apiUrl}/v1/fleets/dev/operations?limit=1`)).json()) as {
      operations: { id: string; fleetId: string; kind: string; state: string }[];
    };
    const op = operations[0]!;
    expect(op).toMatchObject({ kind: 'promote', state: 'succeeded' });
    const listed = await eventually(
      'the promotion to be listed as completed',
      async () => {
        const { stdout } = await run(temporal!, [
          'workflow',
          'list',
          '--address',
          `127.0.0.1:${env.HARU_TEMPORAL_PORT}`,
          '--query',
          `WorkflowType='promotionWorkflow' AND ExecutionStatus='Completed'`,
          '--output',
          'json',
        ]);
        const rows = JSON.parse(stdout) as { execution: { workflowId: string }; status: string }[];
        return rows.some((r) => r.execution.workflowId === `haru/${op.fleetId}/op/${op.id}`) ? rows : undefined;
      },
      60_000,
    );
    const row = listed.find((r) => r.execution.workflowId === `haru/${op.fleetId}/op/${op.id}`);
    expect(row?.status).toBe('WORKFLOW_EXECUTION_STATUS_COMPLETED');

    // The banner's own temporal lines, as printed.
    const lines = dev
      .stdout()
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => / workflow (list|query|signal) /.test(l));
    expect(lines).toHaveLength(4);
    for (const line of lines) {
      const { stdout } = await run('sh', ['-c', line], { cwd: ROOT, env });
      if (line.includes('workflow list')) expect(stdout).toContain(`haru/${op.fleetId}/op/${op.id}`);
      if (line.includes('--type health')) expect(stdout).toMatch(/"activeDomainId"|activeDomainId/);
    }
  });

  it('answers the CLI: JSON on reads, API errors as code and message without a stack trace', async () => {
    const list = await cli(['fleet', 'list', '--json']);
    expect(list.code).toBe(0);
    const fleets = JSON.parse(list.stdout) as { slug: string; routeRevision: number }[];
    expect(fleets.map((f) => f.slug)).toEqual(['dev']);

    const status = await cli(['fleet', 'status', 'dev', '--json']);
    expect(JSON.parse(status.stdout)).toMatchObject({ slug: 'dev' });
    const events = await cli(['fleet', 'events', 'dev', '--json']);
    expect((JSON.parse(events.stdout) as { type: string }[]).map((e) => e.type)).toContain('routing.committed');

    const missing = await cli(['fleet', 'status', 'no-such-fleet']);
    expect(missing.code).toBe(1);
    expect(missing.stderr.trim()).toMatch(/^haru: fleet_not_found: /);
    expect(missing.stderr).not.toMatch(/\n\s+at /);

    const demoteActive = await cli(['fleet', 'demote', 'dev', 'west']);
    expect(demoteActive.code).toBe(1);
    expect(demoteActive.stderr.trim()).toMatch(/^haru: invalid_target: .*active domain/);
    expect(demoteActive.stderr).not.toMatch(/\n\s+at /);
  });

  it('stops everything it started on SIGINT', async () => {
    const tree = descendants(dev.child.pid!);
    expect(tree.length).toBeGreaterThan(3); // the Temporal server, a domain and its supervisor, vLLMs, trainers
    expect(processesMentioning(stateDir).length).toBeGreaterThan(0);
    dev.child.kill('SIGINT');
    const exit = await dev.exited;
    expect(exit).toEqual({ code: 0, signal: null });
    expect(stillRunning(tree)).toEqual([]);
    expect(processesMentioning(stateDir)).toEqual([]);
  });

  it('reuses its state on the next start (now on fresh ports and with an API token): the same fleet, route and history', async () => {
    const routeBefore = { revision: 3, active: 'west' }; // failover, promote back, failover
    // Fresh ports (the old ones may have been taken meanwhile): the layout's URLs are updated in place.
    const token = 'e2e-token-0123456789abcdef';
    env = { ...(await devEnv(stateDir)), HARU_API_TOKEN: token };
    apiUrl = `http://127.0.0.1:${env.PORT}`;
    dev = spawnDev(env);
    const exited = dev.exited.then(({ code, signal }) => {
      throw new Error(`haru dev exited during restart (${signal ?? code}):\n${dev.stdout()}\n${dev.stderr()}`);
    });
    await Promise.race([
      exited,
      eventually(
        'the restarted stack to print its banner',
        () => (dev.stdout().includes('Ctrl-C stops') ? true : undefined),
        240_000,
      ),
    ]);
    exited.catch(() => undefined);
    expect(dev.stdout()).toMatch(/fleet dev: 0 created, \d+ updated/);
    expect(dev.stdout()).not.toContain(token); // sent by reference ($HARU_API_TOKEN), never printed

    const authorized = { authorization: `Bearer ${token}` };
    const intent = routeIntentSchema.parse(
      await (await fetch(`${apiUrl}/v1/fleets/dev/route-intent`, { headers: authorized })).json(),
    );
    expect({ revision: intent.revision, active: intent.activeDomain?.slug }).toEqual(routeBefore);

    // The banner's curl line, as printed, with the token from the environment.
    const chat = await run('sh', ['-c', `${bannerBlock(/# 1\. chat/)} -i`], { cwd: ROOT, env });
    expect(chat.stdout).toMatch(/^HTTP\/1\.1 200/);
    expect(chat.stdout).toMatch(/^x-haru-domain: west\r?$/m);

    const withToken = new OpenAI({ baseURL: `${apiUrl}/v1`, apiKey: token, maxRetries: 0 });
    const { response } = await withToken.chat.completions
      .create({ model: 'llama-70b', messages: [{ role: 'user', content: 'Back again' }] })
      .withResponse();
    expect(response.headers.get('x-haru-domain')).toBe('west');
    const history = (await (await fetch(`${apiUrl}/v1/fleets/dev/operations`, { headers: authorized })).json()) as {
      operations: unknown[];
    };
    expect(history.operations).toHaveLength(3);

    // The CLI sends HARU_API_TOKEN; without it the API's refusal is printed as code and message.
    expect((await cli(['fleet', 'status', 'dev', '--json'])).code).toBe(0);
    const refused = await cli(['fleet', 'list'], { HARU_API_TOKEN: '' });
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim()).toMatch(/^haru: unauthorized: /);

    const tree = descendants(dev.child.pid!);
    dev.child.kill('SIGTERM');
    expect(await dev.exited).toEqual({ code: 0, signal: null });
    expect(stillRunning(tree)).toEqual([]);
    expect(processesMentioning(stateDir)).toEqual([]);
  });
});
