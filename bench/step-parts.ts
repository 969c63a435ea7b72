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
import { testLayout } from '../db/fixtures';
import { createTestDatabase, seedLayout } from '../db/testing';
import { printTable, writeResult } from './support/report';
import { fmt, median } from './support/stats';
import { supervisorParts, timed } from './support/supervisor-parts';

const { values: args } = parseArgs({ options: { rounds: { type: 'string', default: '7' } } });
const ROUNDS = Number(args.rounds);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new Error('--rounds must be a positive integer');

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
    const parts = { ...(await supervisorParts(stateDir, ROUNDS)), ...(await storeParts()) };
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
