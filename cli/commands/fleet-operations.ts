import { type Command, Option } from 'commander';
import { fleetSnapshotSchema, type FleetSnapshot, type Operation } from '../../schemas/entities';
import { operationListResponseSchema } from '../../schemas/api';
import { ageOf } from '../age';
import { integerArg } from '../arguments';
import { apiClientFor } from '../connection';
import { stateCell } from '../demotion-outcome';
import { table } from '../format';
import { isData, isWide, type OutputOptions, renderData } from '../output';

const fleetPath = (fleet: string) => `/v1/fleets/${encodeURIComponent(fleet)}`;

/**
 * `haru fleet operations` as a table: AGE, the move, the state (a promotion whose demotion of the old active
 * failed reads `succeeded (not demoted)`, with the demotion's error), step, id and error; `wide` adds when it
 * was created and finished, why and by whom.
 */
export function formatOperations(
  snapshot: FleetSnapshot,
  operations: readonly Operation[],
  opts: { wide: boolean; now: Date },
): string {
  const slug = (id: string | null) => snapshot.domains.find((d) => d.id === id)?.slug ?? id;
  const headers = ['AGE', 'KIND', 'MOVE', 'STATE', 'STEP', 'OPERATION', 'ERROR'];
  if (opts.wide) headers.push('CREATED', 'FINISHED', 'REQUESTED BY', 'REASON');
  return table(
    headers,
    operations.map((o) => {
      const error = o.error ? `${o.error.step}: ${o.error.code}: ${o.error.message}` : null;
      const row = [
        ageOf(o.createdAt, opts.now),
        o.kind,
        o.kind === 'promote' ? `${slug(o.fromDomainId) ?? 'none'} → ${slug(o.targetDomainId)}` : slug(o.targetDomainId),
        stateCell(o),
        o.step,
        o.id,
        error,
      ];
      return opts.wide ? [...row, o.createdAt, o.finishedAt, o.requestedBy, o.reason] : row;
    }),
  );
}

/** `haru fleet operations <fleet> [--limit N]` on the `fleet` command. */
export function registerFleetOperations(fleet: Command): void {
  fleet
    .command('operations <fleet>')
    .description("list the fleet's operations, newest first, with their age, state, step and error")
    .addOption(new Option('--limit <n>', 'at most this many').argParser(integerArg(1, 1000)).default(20))
    .option('--json', 'print JSON')
    .action(async (ref: string, opts: OutputOptions & { limit: number }, cmd: Command) => {
      const api = apiClientFor(cmd);
      const path = `${fleetPath(ref)}/operations?limit=${opts.limit}`;
      if (isData(opts)) return out(renderData((await api.get(path, operationListResponseSchema)).operations, opts));
      // Independent reads, at the same time: one round trip instead of two.
      const [snapshot, { operations }] = await Promise.all([
        api.get(fleetPath(ref), fleetSnapshotSchema),
        api.get(path, operationListResponseSchema),
      ]);
      out(formatOperations(snapshot, operations, { wide: isWide(opts), now: new Date() }));
    });
}

const out = (text: string): void => {
  process.stdout.write(`${text}\n`);
};
