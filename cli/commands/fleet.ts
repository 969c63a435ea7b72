import { type Command, Option } from 'commander';
import {
  eventListResponseSchema,
  fleetListResponseSchema,
  fleetStatusSchema,
  operationDetailSchema,
  operationListResponseSchema,
  promoteResponseSchema,
} from '../../schemas/api';
import { fleetRepairResponseSchema, pauseResponseSchema } from '../../schemas/api-responses';
import { fleetSnapshotSchema, operationSchema, type HaruEvent } from '../../schemas/entities';
import { ageOf } from '../age';
import { integerArg } from '../arguments';
import type { ApiClient } from '../api-client';
import { apiClientFor } from '../connection';
import { formatFleet, formatOperation, lastFailedOperation, table } from '../format';
import { isData, isWide, type OutputOptions, renderData, renderStreamItem } from '../output';
import { watchOperation } from '../watch-operation';
import { registerFleetOperations } from './fleet-operations';
import { registerFleetHealth } from './status';
import { EXIT } from '../exit-codes';

const out = (line: string): void => {
  process.stdout.write(`${line}\n`);
};
const data = (value: unknown, opts: OutputOptions): void => out(renderData(value, opts));
const fleetPath = (fleet: string) => `/v1/fleets/${encodeURIComponent(fleet)}`;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const watchDeps = (api: ApiClient) => ({ api, write: out, now: () => new Date(), wait: sleep });

/** One event as a line: its age (wide: its time first), cursor, type and message. */
function formatEvent(e: HaruEvent, opts: OutputOptions): string {
  const age = ageOf(e.createdAt, new Date()).padEnd(6);
  return `${isWide(opts) ? `${e.createdAt}  ` : ''}${age} #${e.id}  ${e.type.padEnd(22)} ${e.message}`;
}

type StartOptions = OutputOptions & { reason?: string; wait?: boolean };

/** Starts a promote/demote, prints the answer, and with --wait follows it to the end (exit 0 only on success). */
async function startOperation(
  api: ApiClient,
  kind: 'promote' | 'demote',
  fleet: string,
  domain: string,
  opts: StartOptions,
) {
  const body = { targetDomainId: domain, ...(opts.reason ? { reason: opts.reason } : {}) };
  const { body: answer } = await api.post(`${fleetPath(fleet)}/${kind}`, body, promoteResponseSchema);
  if (answer.status === 'already_active') {
    if (isData(opts)) data(answer, opts);
    else out(`${domain} is already active (route revision ${answer.routeRevision})`);
    return;
  }
  if (!opts.wait) {
    if (isData(opts)) data(answer, opts);
    else out(`${answer.status}: ${formatOperation(answer.operation)}`);
    return;
  }
  out(`${answer.status}: ${kind} ${answer.operation.id}`);
  const final = await watchOperation(watchDeps(api), fleet, answer.operation.id);
  if (isData(opts)) data(final, opts);
  process.exitCode = final.state === 'succeeded' ? EXIT.ok : EXIT.failed;
}

/** Waits until an operation newer than the latest one now starts on `fleet`, and returns its id. */
async function nextOperation(api: ApiClient, fleet: string): Promise<string> {
  const latest = async () =>
    (await api.get(`${fleetPath(fleet)}/operations?limit=1`, operationListResponseSchema)).operations[0]?.id;
  const before = await latest();
  out(`waiting for the next operation on fleet ${fleet} (Ctrl-C to stop)`);
  for (;;) {
    const current = await latest();
    if (current && current !== before) return current;
    await sleep(250);
  }
}

/** Prints the SSE stream of `res` (one `data:` frame per event) as it arrives. */
async function printEventStream(res: Response, opts: OutputOptions): Promise<void> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const text = frame
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trim())
        .join('\n');
      if (!text) continue;
      const event = JSON.parse(text) as HaruEvent;
      out(isData(opts) ? renderStreamItem(event, opts) : formatEvent(event, opts));
    }
  }
}

/**
 * `haru fleet list|status|operations|promote|demote|pause|resume|repair|abort|watch|events`: a client of the
 * Haru API (`--server`/`--token`, HARU_URL/HARU_API_TOKEN, or the config file's context: cli/connection.ts).
 */
export function register(program: Command): void {
  const fleet = program
    .command('fleet')
    .description('inspect and steer fleets through the Haru API (--server, HARU_URL or a config context)');
  registerFleetHealth(fleet);
  registerFleetOperations(fleet);

  fleet
    .command('list')
    .description('list fleets with their active domain and route revision')
    .option('--json', 'print JSON')
    .action(async (opts: OutputOptions, cmd: Command) => {
      const { fleets } = await apiClientFor(cmd).get('/v1/fleets', fleetListResponseSchema);
      if (isData(opts)) return data(fleets, opts);
      const wide = isWide(opts);
      out(
        table(
          ['FLEET', 'ACTIVE', 'REVISION', 'DOMAINS', 'IN FLIGHT', ...(wide ? ['AUTO-FAILOVER', 'ID'] : [])],
          fleets.map((f) => [
            f.slug,
            f.domains.find((d) => d.id === f.activeDomainId)?.slug ?? 'none',
            f.routeRevision,
            f.domains.map((d) => `${d.slug}:${d.state}`).join(' '),
            f.inFlightOperation ? `${f.inFlightOperation.kind}:${f.inFlightOperation.state}` : null,
            ...(wide ? [f.autoFailoverPause ? 'paused' : f.policy.autoFailover ? 'on' : 'off', f.id] : []),
          ]),
        ),
      );
    });

  fleet
    .command('status <fleet>')
    .description(
      'show one fleet: routing pointer, domains, slots, any operation in flight and the last failed one until a later one succeeds',
    )
    .option('--json', 'print JSON (the fleet, with lastFailedOperation)')
    .action(async (ref: string, opts: OutputOptions, cmd: Command) => {
      const api = apiClientFor(cmd);
      // Independent reads, at the same time: one round trip instead of two.
      const [snapshot, recent] = await Promise.all([
        api.get(fleetPath(ref), fleetStatusSchema),
        api.get(`${fleetPath(ref)}/operations?limit=20`, operationListResponseSchema),
      ]);
      const lastFailed = lastFailedOperation(recent.operations);
      if (isData(opts)) return data({ ...snapshot, lastFailedOperation: lastFailed }, opts);
      out(formatFleet(snapshot, lastFailed, { wide: isWide(opts) }));
    });

  for (const kind of ['promote', 'demote'] as const) {
    fleet
      .command(`${kind} <fleet> <domain>`)
      .description(
        kind === 'promote'
          ? 'make <domain> the active domain (verified promotion)'
          : 'put <domain> on standby (drain, sleep, train)',
      )
      .option('--reason <text>', 'why (recorded on the operation)')
      .option('--wait', 'follow the operation step by step; exit 0 on success, 1 otherwise')
      .option('--json', 'print JSON')
      .action((ref: string, domain: string, opts: StartOptions, cmd: Command) =>
        startOperation(apiClientFor(cmd), kind, ref, domain, opts),
      );
  }

  for (const verb of ['pause', 'resume'] as const) {
    fleet
      .command(`${verb} <fleet>`)
      .description(
        verb === 'pause'
          ? 'pause automatic failover (stored on the fleet; detection and marking go on)'
          : 'resume automatic failover',
      )
      .option('--reason <text>', 'why (recorded on the fleet and in its events)')
      .option('--json', 'print JSON')
      .action(async (ref: string, opts: OutputOptions & { reason?: string }, cmd: Command) => {
        const { body } = await apiClientFor(cmd).post(
          `${fleetPath(ref)}/${verb}`,
          opts.reason ? { reason: opts.reason } : {},
          pauseResponseSchema,
        );
        if (isData(opts)) return data(body, opts);
        const state = body.autoFailoverPause ? 'paused' : 'resumed';
        out(`fleet ${ref}: automatic failover ${state}${body.changed ? '' : ' (it already was)'}`);
      });
  }

  fleet
    .command('repair <fleet>')
    .description(
      'end an orphaned operation, start a pending one without a workflow, and have the monitor running and repairing its hosts',
    )
    .option('--json', 'print JSON')
    .action(async (ref: string, opts: OutputOptions, cmd: Command) => {
      const { body } = await apiClientFor(cmd).post(`${fleetPath(ref)}/repair`, {}, fleetRepairResponseSchema);
      if (isData(opts)) return data(body, opts);
      for (const step of body.steps)
        out(`${step.kind.replaceAll('_', ' ')}: ${step.outcome.replaceAll('_', ' ')} (${step.why})`);
    });

  fleet
    .command('abort <fleet> [operation]')
    .description('abort a promotion that has not committed, or a demotion (default: the operation in flight)')
    .option('--reason <text>', 'why')
    .option('--json', 'print JSON')
    .action(
      async (ref: string, operationId: string | undefined, opts: OutputOptions & { reason?: string }, cmd: Command) => {
        const api = apiClientFor(cmd);
        const id = operationId ?? (await api.get(fleetPath(ref), fleetSnapshotSchema)).inFlightOperation?.id;
        if (!id) throw new Error(`fleet ${ref} has no operation in flight`);
        const { body } = await api.post(
          `${fleetPath(ref)}/operations/${encodeURIComponent(id)}/abort`,
          opts.reason ? { reason: opts.reason } : {},
          operationSchema.or(operationDetailSchema),
        );
        if (isData(opts)) return data(body, opts);
        out(`abort requested: ${formatOperation(body)}`);
      },
    );

  fleet
    .command('watch <fleet> [operation]')
    .description('follow an operation step by step (default: the one in flight, else the latest); exit 0 on success')
    .option('--next', 'wait for the next operation to start (a failover after a kill) and follow it')
    .option('--json', 'print the final operation as JSON')
    .action(
      async (ref: string, operationId: string | undefined, opts: OutputOptions & { next?: boolean }, cmd: Command) => {
        const api = apiClientFor(cmd);
        let id = operationId ?? (await api.get(fleetPath(ref), fleetSnapshotSchema)).inFlightOperation?.id;
        if (!id && opts.next) id = await nextOperation(api, ref);
        if (!id)
          id = (await api.get(`${fleetPath(ref)}/operations?limit=1`, operationListResponseSchema)).operations[0]?.id;
        if (!id) throw new Error(`fleet ${ref} has no operations yet (--next waits for one)`);
        const final = await watchOperation(watchDeps(api), ref, id);
        if (isData(opts)) data(final, opts);
        process.exitCode = final.state === 'succeeded' ? EXIT.ok : EXIT.failed;
      },
    );

  fleet
    .command('events <fleet>')
    .description("print the fleet's audit log, newest first (--after pages forward from a cursor, oldest first)")
    .option('--after <id>', 'only events after this cursor, oldest first', integerArg(0))
    .addOption(new Option('--limit <n>', 'at most this many').argParser(integerArg(1, 1000)).default(100))
    .option('--follow', 'print the latest events as they happened, then new ones as they happen (SSE)')
    .option('--json', 'print JSON (one object per line with --follow)')
    .action(
      async (ref: string, opts: OutputOptions & { after?: number; limit: number; follow?: boolean }, cmd: Command) => {
        const api = apiClientFor(cmd);
        const query = new URLSearchParams({
          limit: String(opts.limit),
          ...(opts.after !== undefined ? { after: String(opts.after) } : { order: 'desc' }),
        });
        const { events, nextCursor } = await api.get(`${fleetPath(ref)}/events?${query}`, eventListResponseSchema);
        if (!opts.follow) {
          if (isData(opts)) return data(events, opts);
          for (const e of events) out(formatEvent(e, opts));
          return;
        }
        // Like `tail -f`: what already happened in the order it happened, then each new event below it.
        const backlog = opts.after !== undefined ? events : [...events].reverse();
        for (const e of backlog) out(isData(opts) ? renderStreamItem(e, opts) : formatEvent(e, opts));
        query.delete('order');
        query.set('after', String(nextCursor ?? 0));
        query.set('follow', '1');
        await printEventStream(await api.stream(`${fleetPath(ref)}/events?${query}`), opts);
      },
    );
}
