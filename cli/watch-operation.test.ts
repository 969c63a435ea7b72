import type { StepProgress } from '../schemas/api';
import { createApiClient } from './api-client';
import { watchOperation } from './watch-operation';

const FLEET = '60000000-0000-4000-8000-000000000001';
const EAST = '60000000-0000-4000-8000-00000000000a';
const WEST = '60000000-0000-4000-8000-00000000000b';
const OP = '60000000-0000-4000-8000-0000000000f1';

const domain = (id: string, slug: string) => ({
  id,
  fleetId: FLEET,
  slug,
  displayName: slug,
  provider: 'static',
  placement: {},
  supervisorUrl: 'http://127.0.0.1:9',
  servingBaseUrl: null,
  launch: null,
  state: 'ready',
  stateChangedAt: '2026-01-01T00:00:00.000Z',
  lastSeenAt: null,
  consecutiveFailures: 0,
  lastError: null,
  slots: [],
  isActive: id === WEST,
});
const fleet = {
  id: FLEET,
  slug: 'dev',
  displayName: 'dev',
  activeDomainId: WEST,
  routeRevision: 2,
  policy: {},
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
  inFlightOperation: null,
  domains: [domain(EAST, 'east'), domain(WEST, 'west')],
};
const step = (name: string, status: StepProgress['status'], from: number, to: number | null, lastError?: string) => ({
  step: name,
  status,
  startedAt: new Date(Date.UTC(2026, 0, 1, 0, 0, 0, from * 1000)).toISOString(),
  finishedAt: to === null ? null : new Date(Date.UTC(2026, 0, 1, 0, 0, 0, to * 1000)).toISOString(),
  attempts: 1,
  lastError: lastError ?? null,
});
const operation = (state: string, steps: ReturnType<typeof step>[]) => ({
  id: OP,
  fleetId: FLEET,
  kind: 'promote',
  targetDomainId: WEST,
  fromDomainId: EAST,
  state,
  step: steps.at(-1)?.step ?? null,
  reason: 'east down',
  requestedBy: 'monitor',
  workflowId: `haru/${FLEET}/op/${OP}`,
  routingCommitted: steps.some((s) => s.step === 'commitRouting' && s.status === 'succeeded'),
  routeRevision: 2,
  error: null,
  createdAt: '2026-01-01T00:00:00.000Z',
  startedAt: '2026-01-01T00:00:00.000Z',
  finishedAt: state === 'succeeded' ? '2026-01-01T00:00:42.000Z' : null,
  progress: {
    operationId: OP,
    kind: 'promote',
    phase: state === 'succeeded' ? 'succeeded' : 'running',
    steps,
    abortRequested: false,
  },
});
const storeDown = {
  status: 503,
  body: { error: { code: 'state_store_unavailable', message: 'the state store did not answer' } },
};

/** A fake Haru API answering the fleet read with `fleet` and each operation read with the next answer. */
function watch(answers: { status: number; body: unknown }[]) {
  const fetchImpl = (async (url: string) => {
    const res = url.endsWith('/v1/fleets/dev') ? { status: 200, body: fleet } : (answers.shift() ?? answers.at(-1)!);
    return new Response(JSON.stringify(res.body), { status: res.status });
  }) as unknown as typeof fetch;
  const lines: string[] = [];
  const deps = {
    api: createApiClient({ HARU_URL: 'http://haru.test' }, fetchImpl),
    write: (line: string) => lines.push(line),
    now: () => new Date('2026-01-01T00:00:43.000Z'),
    wait: async () => undefined,
  };
  return { run: () => watchOperation(deps, 'dev', OP), lines };
}

describe('watchOperation', () => {
  const committed = [step('wakeModels', 'succeeded', 0, 2), step('commitRouting', 'succeeded', 2, 2.6)];

  it('prints from → to, the time to the routing commit, and a failed demotion as best effort under a success', async () => {
    const { run, lines } = watch([
      { status: 200, body: operation('running', committed) },
      {
        status: 200,
        body: operation('succeeded', [...committed, step('demoteOldActive', 'failed', 3, 42, 'east unreachable')]),
      },
    ]);
    const final = await run();
    expect(final.state).toBe('succeeded');
    expect(lines[0]).toBe(`promote east → west (${OP})`);
    expect(lines.find((l) => l.includes('demoteOldActive'))).toMatch(/^ {2}! demoteOldActive .*best effort/);
    expect(lines.slice(-3)).toEqual([
      'routing committed 2.60s after start',
      'demotion of east (best effort): failed: east unreachable (the promotion does not depend on it)',
      'succeeded (not demoted) (watched 0ms)',
    ]);
  });

  it('keeps reading while the state store is unreachable, and says so once', async () => {
    const { run, lines } = watch([
      storeDown,
      storeDown,
      storeDown,
      { status: 200, body: operation('succeeded', committed) },
    ]);
    expect((await run()).state).toBe('succeeded');
    expect(lines.filter((l) => l.startsWith('state store unreachable'))).toHaveLength(1);
    expect(lines).toContain('state store reachable again');
  });

  it('stops on any other error', async () => {
    const { run } = watch([
      { status: 404, body: { error: { code: 'operation_not_found', message: 'no such operation' } } },
    ]);
    await expect(run()).rejects.toThrow('operation_not_found: no such operation');
  });
});
