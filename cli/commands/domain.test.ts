import { createApiClient } from '../api-client';
import { runDomainCommand } from './domain';

const FLEET = '50000000-0000-4000-8000-000000000001';
const WEST = '50000000-0000-4000-8000-00000000000b';

const snapshot = (state: string, changedAt: string, lastError: string | null = null) => ({
  id: FLEET,
  slug: 'prod',
  displayName: 'prod',
  activeDomainId: null,
  routeRevision: 0,
  policy: {},
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
  inFlightOperation: null,
  domains: [
    {
      id: WEST,
      fleetId: FLEET,
      slug: 'west',
      displayName: 'west',
      provider: 'skypilot',
      placement: {},
      supervisorUrl: 'http://127.0.0.1:9',
      servingBaseUrl: null,
      launch: { run: 'x' },
      state,
      stateChangedAt: changedAt,
      lastSeenAt: null,
      consecutiveFailures: 0,
      lastError,
      slots: [],
      isActive: false,
    },
  ],
});

/** A fake API: records requests, answers the POST with `answer` and each GET with the next snapshot. */
function fakeApi(answer: { status: number; body: unknown }, snapshots: unknown[]) {
  const requests: { method: string; url: string; body: unknown }[] = [];
  const fetchImpl = (async (url: string, init: RequestInit) => {
    requests.push({ method: init.method!, url, body: init.body ? JSON.parse(String(init.body)) : undefined });
    const res = init.method === 'POST' ? answer : { status: 200, body: snapshots.shift() ?? snapshots.at(-1) };
    return new Response(JSON.stringify(res.body), { status: res.status });
  }) as unknown as typeof fetch;
  const lines: string[] = [];
  const deps = {
    api: createApiClient({ HARU_URL: 'http://haru.test', HARU_API_TOKEN: 't' }, fetchImpl),
    write: (line: string) => lines.push(line),
    wait: async () => undefined,
  };
  return { deps, requests, lines };
}

const accepted = (kind: 'provision' | 'teardown') => ({
  status: 202,
  body: { status: 'accepted', kind, domainId: WEST, workflowId: `haru/${WEST}/${kind}` },
});

it('posts provision to the domain route and prints the workflow id', async () => {
  const api = fakeApi(accepted('provision'), []);
  expect(await runDomainCommand(api.deps, 'provision', 'prod', 'west', { reason: 'capacity' })).toBe(0);
  expect(api.requests).toEqual([
    { method: 'POST', url: 'http://haru.test/v1/fleets/prod/domains/west/provision', body: { reason: 'capacity' } },
  ]);
  expect(api.lines).toEqual([`accepted: provision of west (workflow haru/${WEST}/provision)`]);
});

it('asks for sky stop with --stop and reports an already stopped domain', async () => {
  const api = fakeApi(
    { status: 200, body: { status: 'already_stopped', kind: 'teardown', domainId: WEST, workflowId: null } },
    [],
  );
  expect(await runDomainCommand(api.deps, 'teardown', 'prod', 'west', { stop: true })).toBe(0);
  expect(api.requests[0]!.body).toEqual({ mode: 'stop' });
  expect(api.lines).toEqual(['domain west is already stopped']);
});

it('with --wait follows a failed domain through provisioning to ready and exits 0', async () => {
  const api = fakeApi(accepted('provision'), [
    snapshot('failed', 't0', 'launch: boom'),
    snapshot('failed', 't0', 'launch: boom'),
    snapshot('provisioning', 't1'),
    snapshot('ready', 't2'),
  ]);
  expect(await runDomainCommand(api.deps, 'provision', 'prod', 'west', { wait: true })).toBe(0);
  expect(api.lines).toEqual([
    `accepted: provision of west (workflow haru/${WEST}/provision)`,
    '  domain west: failed',
    '  domain west: provisioning',
    '  domain west: ready',
  ]);
});

it('with --wait exits 1 with the reason when the teardown fails', async () => {
  const api = fakeApi(accepted('teardown'), [
    snapshot('ready', 't0'),
    snapshot('stopping', 't1'),
    snapshot('failed', 't2', 'destroy: `sky down` exited with code 1'),
  ]);
  expect(await runDomainCommand(api.deps, 'teardown', 'prod', 'west', { wait: true })).toBe(1);
  expect(api.lines.at(-1)).toBe('teardown of west failed: destroy: `sky down` exited with code 1');
});

it('surfaces an API refusal as ApiError with its code', async () => {
  const api = fakeApi(
    { status: 422, body: { error: { code: 'invalid_target', message: 'domain east is the active domain' } } },
    [],
  );
  await expect(runDomainCommand(api.deps, 'teardown', 'prod', 'east', {})).rejects.toThrow(
    'invalid_target: domain east is the active domain',
  );
});
