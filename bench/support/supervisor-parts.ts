import path from 'node:path';
import { createSupervisorClient } from '../../activities/supervisor-client';
import { fleetLayoutSchema } from '../../schemas/layout';
import { SIM_TRAINER, type SimDomain, startSimDomain } from '../../sim/domain';
import { freePort } from '../../test/support/ports';

/** A monotonic clock in ms with the fraction. */
export const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
/** Runs `fn` and pushes its wall time (ms, fractional) onto `into`. */
export async function timed<T>(into: number[], fn: () => Promise<T>): Promise<T> {
  const t = nowMs();
  const value = await fn();
  into.push(nowMs() - t);
  return value;
}

/**
 * One simulated standby host under `stateDir`: the real supervisor, a fake vLLM serving model `m` at zero
 * wake delay (asleep), the fake nvidia-smi and a real trainer process (running). The caller stops it.
 */
export async function startStandbyHost(stateDir: string): Promise<SimDomain> {
  const domain = async (slug: string, training: boolean) => ({
    slug,
    supervisorUrl: `http://127.0.0.1:${await freePort()}`,
    slots: [
      {
        kind: 'inference' as const,
        gpuIndex: 0,
        models: [{ name: 'm', servingUrl: `http://127.0.0.1:${await freePort()}/v1` }],
      },
      ...(training
        ? [
            {
              kind: 'training' as const,
              gpuIndex: 0,
              command: ['node', SIM_TRAINER],
              checkpointDir: path.join(stateDir, 'ckpt'),
            },
          ]
        : []),
    ],
  });
  const layout = fleetLayoutSchema.parse({
    fleet: { slug: 'parts', activeDomain: 'east', policy: {} },
    domains: [await domain('east', false), await domain('west', true)],
  });
  return startSimDomain({
    layout,
    domainSlug: 'west',
    stateDir: path.join(stateDir, 'west'),
    role: 'standby',
    wakeDelayMs: 0,
  });
}

/**
 * Each supervisor call of a promotion's steps, timed alone, against `host` (a `startStandbyHost`): `rounds`
 * rounds after one untimed warm-up round, each taking the host from standby to serving and back to standby.
 * Returns each part's times (ms).
 */
export async function timeSupervisorParts(host: SimDomain, rounds: number): Promise<Record<string, number[]>> {
  const client = createSupervisorClient({});
  const url = { slug: 'west', supervisorUrl: host.supervisorUrl }; // the domain as the client sees it
  const parts: Record<string, number[]> = {
    'status read (models asleep)': [],
    'stop training request': [],
    'stop request -> trainer group gone (status polled)': [],
    'GPU memory read (two fake nvidia-smi runs)': [],
    'wake request (zero wake delay)': [],
    'status read (models awake)': [],
    'probe (4 tokens)': [],
  };
  const p = (name: string) => parts[name]!;
  for (let round = 0; round <= rounds; round += 1) {
    const sink: Record<string, number[]> =
      round === 0 ? Object.fromEntries(Object.keys(parts).map((k) => [k, []])) : parts;
    const q = (name: string) => (round === 0 ? sink[name]! : p(name));
    await timed(q('status read (models asleep)'), () => client.status(url, {}));
    const stopAt = nowMs();
    await timed(q('stop training request'), () =>
      client.stopTraining(url, { gpuIndex: 0, graceMs: 5_000 }, { timeoutMs: 10_000 }),
    );
    for (;;) {
      const s = await client.status(url, {});
      if (s.training.every((r) => r.state === 'idle' && r.pids.length === 0)) break;
    }
    q('stop request -> trainer group gone (status polled)').push(nowMs() - stopAt);
    await timed(q('GPU memory read (two fake nvidia-smi runs)'), () => client.gpuMemory(url, {}));
    await timed(q('wake request (zero wake delay)'), () => client.wake(url, { gpuIndex: 0 }, { timeoutMs: 10_000 }));
    await timed(q('status read (models awake)'), () => client.status(url, {}));
    await timed(q('probe (4 tokens)'), () =>
      client.probe(url, { prompt: 'ping', maxTokens: 4, timeoutMs: 5_000, models: ['m'] }, { timeoutMs: 10_000 }),
    );
    // Back to standby for the next round (not timed).
    await client.sleep(url, { gpuIndex: 0, level: 1 }, { timeoutMs: 10_000 });
    await client.startTraining(url, { gpuIndex: 0 }, { timeoutMs: 10_000 });
    for (;;) {
      const s = await client.status(url, {});
      if (s.training.every((r) => r.state === 'running' && r.pids.length > 0)) break;
    }
  }
  return parts;
}

/** `startStandbyHost` and `timeSupervisorParts`, then the host stopped. */
export async function supervisorParts(stateDir: string, rounds: number): Promise<Record<string, number[]>> {
  const host = await startStandbyHost(stateDir);
  try {
    return await timeSupervisorParts(host, rounds);
  } finally {
    await host.stop();
  }
}
