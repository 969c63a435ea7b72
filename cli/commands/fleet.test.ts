/**
 * `haru fleet status|operations` through the real `node bin/haru.js` against a stand-in API: the two reads of
 * `status` are in flight together, tables show ages, `-o wide` and `-o yaml` print what they promise.
 */
import type http from 'node:http';
import YAML from 'yaml';
import { runCli } from '../../test/support/cli';
import {
  type FakeApi,
  fleetStatusFixture,
  promotionFixture,
  startFakeApi,
  stepFailedEvent,
} from '../../test/support/fake-haru-api';

const OP1 = '00000000-0000-4000-8000-000000000101';
const fleet = fleetStatusFixture();
const promotion = promotionFixture(OP1, new Date(Date.now() - 30 * 60_000).toISOString(), {
  // Succeeded without its demotion: the row keeps that step's failure (workflows/promotion.ts).
  error: {
    step: 'demoteOldActive',
    code: 'SupervisorUnreachable',
    message: 'old active unreachable, left as it was (drain: refused)',
  },
});
const event = stepFailedEvent(9, OP1, 'demoteOldActive', 'old active unreachable, left as it was (drain: refused)');

/**
 * Answers the fleet and its operations only once both were asked for, so a client that reads one and then the
 * other gets `503` after two seconds instead.
 */
function together(): Record<string, (req: http.IncomingMessage, res: http.ServerResponse) => void> {
  const waiting: (() => void)[] = [];
  const hold = (body: unknown) => (_req: http.IncomingMessage, res: http.ServerResponse) => {
    const answer = (status: number, json: unknown) =>
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(json));
    const timer = setTimeout(
      () => answer(503, { error: { code: 'not_together', message: 'the other read never came' } }),
      2_000,
    );
    waiting.push(() => {
      clearTimeout(timer);
      answer(200, body);
    });
    if (waiting.length === 2) waiting.splice(0).forEach((release) => release());
  };
  return {
    '/v1/fleets/prod': hold(fleet),
    '/v1/fleets/prod/operations?limit=20': hold({ operations: [promotion] }),
  };
}

let api: FakeApi;
beforeAll(async () => {
  api = await startFakeApi({
    ...together(),
    '/v1/fleets': { body: { fleets: [fleet] } },
    '/v1/fleets/prod/events?limit=100&order=desc': {
      body: { events: [{ ...event, createdAt: promotion.createdAt }], nextCursor: 9 },
    },
  });
});
afterAll(() => api.close());
const haru = (args: string[]) => runCli(args, { HARU_URL: api.url, HARU_API_TOKEN: '', HARU_CONFIG: '/nonexistent' });

it('`fleet status` asks for the fleet and its operations at once', async () => {
  const run = await haru(['fleet', 'status', 'prod']);
  expect([run.code, run.stderr]).toEqual([0, '']);
  expect(run.stdout).toMatch(/^a +active +ready +static +1\.0s ago +gpu0:serving\[llama\]/m);
});

it('`fleet status -o wide` adds when each domain was heard and its id; -o yaml prints the fleet as YAML', async () => {
  const wide = await haru(['fleet', 'status', 'prod', '-o', 'wide']);
  expect(wide.stdout).toMatch(/^DOMAIN +ROLE +STATE +PROVIDER +LAST HEARD +LAST HEARD AT +ID +SLOTS$/m);
  expect(wide.stdout).toMatch(
    new RegExp(`^b +standby .* 2030-01-01T00:00:00\\.000Z +${fleet.domains[1]!.id} +gpu0`, 'm'),
  );
  const yaml = await haru(['fleet', 'status', 'prod', '-o', 'yaml']);
  expect(YAML.parse(yaml.stdout)).toEqual({ ...fleet, lastFailedOperation: null });
});

it('`fleet operations` shows the age, and a promotion whose demotion failed as succeeded (not demoted)', async () => {
  const run = await haru(['fleet', 'operations', 'prod']);
  expect(run.code).toBe(0);
  expect(run.stdout.split('\n')[1]).toMatch(
    /^30m +promote +a → b +succeeded \(not demoted\) +demoteOldActive +\S+ +demoteOldActive: SupervisorUnreachable: old active unreachable/,
  );
});

it('`fleet events` starts each line with the age, and -o wide with the time before it', async () => {
  const run = await haru(['fleet', 'events', 'prod']);
  expect(run.stdout.trim()).toMatch(/^30m +#9 +operation\.step +demoteOldActive failed: /);
  const wide = await haru(['fleet', 'events', 'prod', '-o', 'wide']);
  expect(wide.stdout.trim().startsWith(`${promotion.createdAt}  30m`)).toBe(true);
});

it('`fleet list -o wide` adds whether automatic failover is on and the fleet id', async () => {
  const [header, row] = (await haru(['fleet', 'list', '-o', 'wide'])).stdout.split('\n');
  expect(header).toMatch(/^FLEET +ACTIVE +REVISION +DOMAINS +IN FLIGHT +AUTO-FAILOVER +ID$/);
  expect(row).toMatch(new RegExp(`^prod +a +3 +a:ready b:ready +- +on +${fleet.id}$`));
  expect((await haru(['fleet', 'list'])).stdout.split('\n')[0]).toMatch(/IN FLIGHT$/);
});
