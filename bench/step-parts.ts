/**
 * `npm run bench:step-parts`: what the promotion's step activities are made of, each part timed alone.
 * Supervisor calls against one simulated standby host (the real supervisor, fake vLLM at zero wake delay,
 * the fake nvidia-smi, a real trainer process), and the state-store statements a step makes, against a
 * fresh database on the machine's Postgres. Medians of `--rounds` rounds (ms, 0.1 ms resolution).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createSupervisorClient } from '../activities/supervisor-client';
import { testLayout } from '../db/fixtures';
import { createTestDatabase, seedLayout } from '../db/testing';
import { fleetLayoutSchema } from '../schemas/layout';
import { SIM_TRAINER, startSimDomain } from '../sim/domain';
import { freePort } from '../test/support/ports';
import { printTable, writeResult } from './support/report';
import { fmt, median } from './support/stats';

const { values: args } = parseArgs({ options: { rounds: { type: 'string', default: '7' } } });
const ROUNDS = Number(args.rounds);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new Error('--rounds must be a positive integer');

const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
async function timed<T>(into: number[], fn: () => Promise<T>): Promise<T> {
  const t = nowMs();
  const value = await fn();
  into.push(nowMs() - t);
  return value;
}

async function supervisorParts(stateDir: string): Promise<Record<string, number[]>> {
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
  const host = await startSimDomain({
    layout,
    domainSlug: 'west',
    stateDir: path.join(stateDir, 'west'),
    role: 'standby',
    wakeDelayMs: 0,
  });
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
  try {
    for (let round = 0; round <= ROUNDS; round += 1) {
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
  } finally {
    await host.stop();
  }
  return parts;
}

async function storeParts(): Promise<Record<string, number[]>> {
  const db = await createTestDatabase();
  const parts: Record<string, number[]> = {
    'store: domain row': [],
    'store: domain slots': [],
    'store: operation current step': [],
    'store: event append': [],
    'store: slot state': [],
    'store: fleet snapshot': [],
  };
  try {
    const { fleetId } = await seedLayout(db.store, testLayout({ fleet: 'parts' }));
    const fleet = (await db.store.fleets.snapshot(fleetId))!;
    const west = fleet.domains[1]!;
    const { operation } = await db.store.operations.create({
      fleetId,
      kind: 'promote',
      targetDomainId: west.id,
      reason: 'bench',
      requestedBy: 'bench',
    });
    await db.store.operations.start(operation.id);
    for (let round = 0; round <= ROUNDS * 3; round += 1) {
      const into = (name: string) => (round === 0 ? [] : parts[name]!);
      await timed(into('store: domain row'), () => db.store.domains.get(west.id));
      const slots = await timed(into('store: domain slots'), () => db.store.slots.listByDomain(west.id));
      await timed(into('store: operation current step'), () => db.store.operations.setStep(operation.id, 'wakeModels'));
      await timed(into('store: event append'), () =>
        db.store.events.append({
          fleetId,
          operationId: operation.id,
          domainId: west.id,
          type: 'operation.step',
          message: 'bench',
        }),
      );
      await timed(into('store: slot state'), () =>
        db.store.slots.transition(slots[0]!.id, round % 2 ? 'waking' : 'sleeping').catch(() => null),
      );
      await timed(into('store: fleet snapshot'), () => db.store.fleets.snapshot(fleetId));
    }
  } finally {
    await db.drop();
  }
  return parts;
}

async function main(): Promise<void> {
  const stateDir = mkdtempSync(path.join(os.tmpdir(), 'haru-bench-parts-'));
  try {
    const parts = { ...(await supervisorParts(stateDir)), ...(await storeParts()) };
    const rows = Object.entries(parts).map(([name, v]) => [
      name,
      fmt(median(v), 1),
      fmt(Math.min(...v), 1),
      fmt(Math.max(...v), 1),
      String(v.length),
    ]);
    printTable('parts of a promotion step, each timed alone (ms)', ['part', 'median', 'min', 'max', 'n'], rows);
    const file = writeResult('step-parts', { options: { rounds: ROUNDS }, parts });
    process.stdout.write(`\nwritten: ${file}\n`);
  } finally {
    rmSync(stateDir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(
      `bench:step-parts failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(1);
  },
);
