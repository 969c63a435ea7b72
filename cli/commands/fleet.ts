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
import { parseEnv } from '../../schemas/env';
import { integerArg } from '../arguments';
import { type ApiClient, cliEnvSchema, createApiClient } from '../api-client';
import { formatFleet, formatOperation, lastFailedOperation, table } from '../format';
import { watchOperation } from '../watch-operation';
import { registerFleetHealth } from './status';

const out = (line: string): void => {
  process.stdout.write(`${line}\n`);
};
const json = (value: unknown): void => out(JSON.stringify(value, null, 2));
const client = (): ApiClient => createApiClient(parseEnv(cliEnvSchema, process.env, 'CLI'));
const fleetPath = (fleet: string) => `/v1/fleets/${encodeURIComponent(fleet)}`;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const watchDeps = (api: ApiClient) => ({ api, write: out, now: () => new Date(), wait: sleep });

function formatEvent(e: HaruEvent): string {
  return `${e.createdAt}  #${e.id}  ${e.type.padEnd(22)} ${e.message}`;
}

/** Starts a promote/demote, prints the answer, and with --wait follows it to the end (exit 0 only on success). */
async function startOperation(
  kind: 'promote' | 'demote',
  fleet: string,
  domain: string,
  opts: { reason?: string; wait?: boolean; json?: boolean },
) {
  const api = client();
  const body = { targetDomainId: domain, ...(opts.reason ? { reason: opts.reason } : {}) };
  const { body: answer } = await api.post(`${fleetPath(fleet)}/${kind}`, body, promoteResponseSchema);
  if (answer.status === 'already_active') {
    if (opts.json) json(answer);
    else out(`${domain} is already active (route revision ${answer.routeRevision})`);
    return;
  }
  if (!opts.wait) {
    if (opts.json) json(answer);
    else out(`${answer.status}: ${formatOperation(answer.operation)}`);
    return;
  }
  out(`${answer.status}: ${kind} ${answer.operation.id}`);
  const final = await watchOperation(watchDeps(api), fleet, answer.operation.id);
  if (opts.json) json(final);
  process.exitCode = final.state === 'succeeded' ? 0 : 1;
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

/** `haru fleet list|status|operations|promote|demote|pause|resume|repair|abort|watch|events`: a client of the Haru API (HARU_URL, HARU_API_TOKEN). */
export function register(program: Command): void {
  const fleet = program
    .command('fleet')
    .description('inspect and steer fleets through the Haru API (HARU_URL, HARU_API_TOKEN)');
  registerFleetHealth(fleet);

  fleet
    .command('list')
    .description('list fleets with their active domain and route revision')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const { fleets } = await client().get('/v1/fleets', fleetListResponseSchema);
      if (opts.json) return json(fleets);
      out(
        table(
          ['FLEET', 'ACTIVE', 'REVISION', 'DOMAINS', 'IN FLIGHT'],
          fleets.map((f) => [
            f.slug,
            f.domains.find((d) => d.id === f.activeDomainId)?.slug ?? 'none',
            f.routeRevision,
            f.domains.map((d) => `${d.slug}:${d.state}`).join(' '),
            f.inFlightOperation ? `${f.inFlightOperation.kind}:${f.inFlightOperation.state}` : null,
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
    .action(async (ref: string, opts: { json?: boolean }) => {
      const api = client();
      const snapshot = await api.get(fleetPath(ref), fleetStatusSchema);
      const recent = await api.get(`${fleetPath(ref)}/operations?limit=20`, operationListResponseSchema);
      const lastFailed = lastFailedOperation(recent.operations);
      if (opts.json) return json({ ...snapshot, lastFailedOperation: lastFailed });
      out(formatFleet(snapshot, lastFailed));
    });

  fleet
    .command('operations <fleet>')
    .description("list the fleet's operations, newest first, with their state, step and error")
    .addOption(new Option('--limit <n>', 'at most this many').argParser(integerArg(1, 1000)).default(20))
    .option('--json', 'print JSON')
    .action(async (ref: string, opts: { limit: number; json?: boolean }) => {
      const api = client();
      const snapshot = await api.get(fleetPath(ref), fleetSnapshotSchema);
      const { operations } = await api.get(
        `${fleetPath(ref)}/operations?limit=${opts.limit}`,
        operationListResponseSchema,
      );
      if (opts.json) return json(operations);
      const slug = (id: string | null) => snapshot.domains.find((d) => d.id === id)?.slug ?? id;
      out(
        table(
          ['CREATED', 'KIND', 'MOVE', 'STATE', 'STEP', 'OPERATION', 'ERROR'],
          operations.map((o) => [
            o.createdAt,
            o.kind,
            o.kind === 'promote'
              ? `${slug(o.fromDomainId) ?? 'none'} → ${slug(o.targetDomainId)}`
              : slug(o.targetDomainId),
            o.state,
            o.step,
            o.id,
            o.error ? `${o.error.step}: ${o.error.code}: ${o.error.message}` : null,
          ]),
        ),
      );
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
      .action((ref: string, domain: string, opts: { reason?: string; wait?: boolean; json?: boolean }) =>
        startOperation(kind, ref, domain, opts),
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
      .action(async (ref: string, opts: { reason?: string; json?: boolean }) => {
        const { body } = await client().post(
          `${fleetPath(ref)}/${verb}`,
          opts.reason ? { reason: opts.reason } : {},
          pauseResponseSchema,
        );
        if (opts.json) return json(body);
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
    .action(async (ref: string, opts: { json?: boolean }) => {
      const { body } = await client().post(`${fleetPath(ref)}/repair`, {}, fleetRepairResponseSchema);
      if (opts.json) return json(body);
      for (const step of body.steps)
        out(`${step.kind.replaceAll('_', ' ')}: ${step.outcome.replaceAll('_', ' ')} (${step.why})`);
    });

  fleet
    .command('abort <fleet> [operation]')
    .description('abort a promotion that has not committed, or a demotion (default: the operation in flight)')
    .option('--reason <text>', 'why')
    .option('--json', 'print JSON')
    .action(async (ref: string, operationId: string | undefined, opts: { reason?: string; json?: boolean }) => {
      const api = client();
      const id = operationId ?? (await api.get(fleetPath(ref), fleetSnapshotSchema)).inFlightOperation?.id;
      if (!id) throw new Error(`fleet ${ref} has no operation in flight`);
      const { body } = await api.post(
        `${fleetPath(ref)}/operations/${encodeURIComponent(id)}/abort`,
        opts.reason ? { reason: opts.reason } : {},
        operationSchema.or(operationDetailSchema),
      );
      if (opts.json) return json(body);
      out(`abort requested: ${formatOperation(body)}`);
    });

  fleet
    .command('watch <fleet> [operation]')
    .description('follow an operation step by step (default: the one in flight, else the latest); exit 0 on success')
    .option('--next', 'wait for the next operation to start (a failover after a kill) and follow it')
    .option('--json', 'print the final operation as JSON')
    .action(async (ref: string, operationId: string | undefined, opts: { next?: boolean; json?: boolean }) => {
      const api = client();
      let id = operationId ?? (await api.get(fleetPath(ref), fleetSnapshotSchema)).inFlightOperation?.id;
      if (!id && opts.next) id = await nextOperation(api, ref);
      if (!id)
        id = (await api.get(`${fleetPath(ref)}/operations?limit=1`, operationListResponseSchema)).operations[0]?.id;
      if (!id) throw new Error(`fleet ${ref} has no operations yet (--next waits for one)`);
      const final = await watchOperation(watchDeps(api), ref, id);
      if (opts.json) json(final);
      process.exitCode = final.state === 'succeeded' ? 0 : 1;
    });

  fleet
    .command('events <fleet>')
    .description("print the fleet's audit log, newest first (--after pages forward from a cursor, oldest first)")
    .option('--after <id>', 'only events after this cursor, oldest first', integerArg(0))
    .addOption(new Option('--limit <n>', 'at most this many').argParser(integerArg(1, 1000)).default(100))
    .option('--follow', 'print the latest events as they happened, then new ones as they happen (SSE)')
    .option('--json', 'print JSON (one object per line with --follow)')
    .action(async (ref: string, opts: { after?: number; limit: number; follow?: boolean; json?: boolean }) => {
      const api = client();
      const query = new URLSearchParams({
        limit: String(opts.limit),
        ...(opts.after !== undefined ? { after: String(opts.after) } : { order: 'desc' }),
      });
      const { events, nextCursor } = await api.get(`${fleetPath(ref)}/events?${query}`, eventListResponseSchema);
      if (!opts.follow) {
        if (opts.json) return json(events);
        for (const e of events) out(formatEvent(e));
        return;
      }
      // Like `tail -f`: what already happened in the order it happened, then each new event below it.
      const backlog = opts.after !== undefined ? events : [...events].reverse();
      for (const e of backlog) out(opts.json ? JSON.stringify(e) : formatEvent(e));
      query.delete('order');
      query.set('after', String(nextCursor ?? 0));
      query.set('follow', '1');
      const res = await api.stream(`${fleetPath(ref)}/events?${query}`);
      const decoder = new TextDecoder();
      let buffer = '';
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = frame
            .split('\n')
            .filter((l) => l.startsWith('data:'))
            .map((l) => l.slice(5).trim())
            .join('\n');
          if (!data) continue;
          const event = JSON.parse(data) as HaruEvent;
          out(opts.json ? JSON.stringify(event) : formatEvent(event));
        }
      }
    });
}
