/**
 * A whole simulated domain as real processes: fake vLLMs, the supervisor and its trainers. Starting waits for
 * every process; stop() and kill() leave nothing behind.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fleetLayoutSchema, type FleetLayout } from '../schemas/layout';
import { gpuMemoryReportSchema, supervisorStatusSchema } from '../schemas/supervisor';
import { freePort } from '../test/support/ports';
import { judgeGpu } from '../core/gpu-release';
import { waitFor } from '../test/supervisor/support';
import { startSimDomain, type SimDomain } from './domain';
import { SIM_RESIDUE_MIB } from './domain-plan';
import { isAlive } from './gpu-state';

const TOKEN = 'sim-domain-test-token';
let root: string;
const started: SimDomain[] = [];

beforeAll(() => {
  root = mkdtempSync(path.join(os.tmpdir(), 'haru-sim-domain-'));
});
afterAll(async () => {
  await Promise.all(started.map((d) => d.kill()));
  rmSync(root, { recursive: true, force: true });
});

/** The dev fleet's shape on free ports: GPU 0 two small models, GPU 1 one large model (level 2), a trainer per GPU. */
async function layout(): Promise<FleetLayout> {
  const url = async () => `http://127.0.0.1:${await freePort()}`;
  const trainer = (gpuIndex: number) => ({
    kind: 'training' as const,
    gpuIndex,
    command: ['node', 'sim/trainer.js', '--interval-ms', '50'],
    checkpointDir: `checkpoints/gpu${gpuIndex}`,
  });
  return fleetLayoutSchema.parse({
    fleet: { slug: 'sim-test', activeDomain: 'east' },
    domains: [
      {
        slug: 'east',
        supervisorUrl: await url(),
        slots: [
          {
            kind: 'inference',
            gpuIndex: 0,
            models: [
              { name: 'qwen-0.5b', servingUrl: await url() },
              { name: 'llama-1b', servingUrl: await url() },
            ],
          },
          { kind: 'inference', gpuIndex: 1, sleepLevel: 2, models: [{ name: 'llama-70b', servingUrl: await url() }] },
          trainer(0),
          trainer(1),
        ],
      },
    ],
  });
}

async function start(role: 'active' | 'standby', dir: string) {
  const domain = await startSimDomain({
    layout: await layout(),
    domainSlug: 'east',
    stateDir: path.join(root, dir),
    supervisorToken: TOKEN,
    wakeDelayMs: 20,
    tokensPerSecond: 2_000,
    role,
    shutdownGraceMs: 3_000,
  });
  started.push(domain);
  return domain;
}

const supervisor = async (domain: SimDomain, method: string, route: string, body?: unknown) => {
  const res = await fetch(`${domain.supervisorUrl}${route}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return (await res.json()) as unknown;
};
const status = async (domain: SimDomain) => supervisorStatusSchema.parse(await supervisor(domain, 'GET', '/v1/status'));

function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(true));
  });
}

const chat = (port: number, signal?: AbortSignal) =>
  fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 }),
    signal,
  });

describe('simulated domain', () => {
  it('starts as a standby with every engine asleep and training holding VRAM, and stop() leaves no process', async () => {
    const domain = await start('standby', 'standby');
    const st = await status(domain);
    expect(st.models.map((m) => [m.name, m.state])).toEqual([
      ['qwen-0.5b', 'asleep'],
      ['llama-1b', 'asleep'],
      ['llama-70b', 'asleep'],
    ]);
    expect(st.training.map((t) => t.state)).toEqual(['running', 'running']);
    const trainerPids = st.training.flatMap((t) => t.pids);
    // A trainer takes its VRAM once it has started, as a real one does: awaited, not assumed at the first read.
    await waitFor('every trainer to hold GPU memory', async () => {
      const memory = gpuMemoryReportSchema.parse(await supervisor(domain, 'GET', '/v1/gpu/memory'));
      const holders = memory.gpus.flatMap((g) => g.processes.map((p) => p.pid));
      return trainerPids.every((pid) => holders.includes(pid));
    });

    const pids = [...domain.models.map((m) => m.pid), domain.supervisorPid, ...trainerPids];
    expect(pids.every(isAlive)).toBe(true);

    // Trainers gone, the engines' residue stays: theirs, so the wake may go ahead although it is over 10%.
    await supervisor(domain, 'POST', '/v1/training/stop', { graceMs: 3_000 });
    const released = await waitFor('training idle and released', async () => {
      const report = gpuMemoryReportSchema.parse(await supervisor(domain, 'GET', '/v1/gpu/memory'));
      return report.gpus.every((g) => !g.processes.some((p) => trainerPids.includes(p.pid))) && report;
    });
    const gpu0 = released.gpus[0]!;
    expect(gpu0.usedMiB! / gpu0.totalMiB!).toBeGreaterThan(0.1);
    const [qwen, llama] = domain.models;
    expect(gpu0.models).toEqual([
      {
        name: qwen!.name,
        pids: [qwen!.pid],
        residueMiB: SIM_RESIDUE_MIB,
        wakeNeedMiB: Math.round(0.45 * 81_559) - SIM_RESIDUE_MIB,
      },
      {
        name: llama!.name,
        pids: [llama!.pid],
        residueMiB: SIM_RESIDUE_MIB,
        wakeNeedMiB: Math.round(0.45 * 81_559) - SIM_RESIDUE_MIB,
      },
    ]);
    for (const gpu of released.gpus) expect(judgeGpu(gpu, trainerPids, 0.1).problems).toEqual([]);

    await domain.stop();
    expect(pids.filter(isAlive)).toEqual([]);
    for (const m of domain.models) expect(await refused(m.port)).toBe(true);
  });

  it('injects faults into one engine: hang, refused connections, crash', async () => {
    const domain = await start('active', 'faults');
    const [small, other] = domain.models;

    await domain.faults.set(small!.name, { hang: true });
    const hung = await chat(small!.port, AbortSignal.timeout(300)).catch((e: Error) => e);
    expect(hung).toMatchObject({ name: 'TimeoutError' }); // no answer: the client gave up
    expect((await chat(other!.port)).status).toBe(200);
    await domain.faults.clear(small!.name);
    expect((await chat(small!.port)).status).toBe(200);

    await domain.faults.set(small!.name, { refuse: true });
    expect(await refused(small!.port)).toBe(true);
    expect((await status(domain)).models[0]).toMatchObject({ state: 'unknown' });
    await domain.faults.clear();
    expect(await refused(small!.port)).toBe(false);

    await domain.faults.crash(small!.name); // SIGKILL from outside
    expect(isAlive(small!.pid)).toBe(false);
    await domain.faults.set(other!.name, { crash: true }); // the engine dies by itself
    expect(isAlive(other!.pid)).toBe(false);
    expect((await status(domain)).models.map((m) => m.state)).toEqual(['unknown', 'unknown', 'awake']);
    await expect(domain.faults.set(small!.name, { hang: true })).rejects.toThrow(/is not running/);

    domain.faults.gpu({ lost: [0] });
    const lost = gpuMemoryReportSchema.parse(await supervisor(domain, 'GET', '/v1/gpu/memory'));
    expect(lost.gpus.map((g) => g.error?.kind ?? null)).toEqual(['lost', ...lost.gpus.slice(1).map(() => null)]);
    await domain.stop();
  });

  it('kill() takes every process down at once, trainers included, like a host losing power', async () => {
    const domain = await start('standby', 'kill');
    const trainerPids = (await status(domain)).training.flatMap((t) => t.pids);
    expect(trainerPids).toHaveLength(2);
    const pids = [...domain.models.map((m) => m.pid), domain.supervisorPid, ...trainerPids];
    await domain.kill();
    expect(pids.filter(isAlive)).toEqual([]);
    expect(await refused(Number(new URL(domain.supervisorUrl).port))).toBe(true);
  });

  it('fails with the log of a process that cannot start and leaves nothing running', async () => {
    const l = await layout();
    const taken = net.createServer();
    const port = Number(
      new URL(l.domains[0]!.slots[0]!.kind === 'inference' ? l.domains[0]!.slots[0]!.models[1]!.servingUrl : '').port,
    );
    await new Promise<void>((resolve) => taken.listen(port, '127.0.0.1', resolve));
    try {
      await expect(
        startSimDomain({ layout: l, domainSlug: 'east', stateDir: path.join(root, 'taken'), supervisorToken: TOKEN }),
      ).rejects.toThrow(/simulated vllm llama-1b exited during start-up[\s\S]*EADDRINUSE/);
      const supervisorPort = Number(new URL(l.domains[0]!.supervisorUrl).port);
      expect(await refused(supervisorPort)).toBe(true);
      await expect(startSimDomain({ layout: l, domainSlug: 'west', stateDir: path.join(root, 'x') })).rejects.toThrow(
        /domain "west" is not in fleet "sim-test"/,
      );
    } finally {
      taken.close();
    }
  });
});
