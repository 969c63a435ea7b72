/**
 * LoRA adapters end to end on a simulated domain (real supervisor and fake vLLM processes): two served names on
 * one serving URL are one vLLM server started with `--lora-modules`, which lists the adapter in /v1/models with
 * its `parent`; the supervisor reports, probes, fingerprints, sleeps and wakes each name.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fingerprintResponseSchema, FINGERPRINT_PROMPT } from '../../schemas/fingerprint';
import { fleetLayoutSchema } from '../../schemas/layout';
import { probeResponseSchema, supervisorActionResponseSchema, supervisorStatusSchema } from '../../schemas/supervisor';
import { startSimDomain, type SimDomain } from '../../sim/domain';
import { freePort } from '../support/ports';

jest.setTimeout(60_000);

let root: string;
let domain: SimDomain;
let servingUrl: string;

const post = async (route: string, body: unknown) => {
  const res = await fetch(`${domain.supervisorUrl}${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return res.json() as Promise<unknown>;
};
const states = async () =>
  supervisorStatusSchema
    .parse(await (await fetch(`${domain.supervisorUrl}/v1/status`)).json())
    .models.map((m) => [m.name, m.state]);

beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'haru-lora-'));
  servingUrl = `http://127.0.0.1:${await freePort()}/v1`;
  const layout = fleetLayoutSchema.parse({
    fleet: { slug: 'lora', activeDomain: 'east' },
    domains: [
      {
        slug: 'east',
        supervisorUrl: `http://127.0.0.1:${await freePort()}`,
        slots: [
          {
            kind: 'inference',
            gpuIndex: 0,
            models: [
              { name: 'llama-1b', servingUrl },
              { name: 'llama-1b-sql', servingUrl },
            ],
          },
        ],
      },
    ],
  });
  domain = await startSimDomain({ layout, domainSlug: 'east', stateDir: path.join(root, 'east') });
});
afterAll(async () => {
  await domain?.kill();
  rmSync(root, { recursive: true, force: true });
});

it('runs one vLLM server for both names, listing the adapter with its parent', async () => {
  expect(domain.models.map((m) => [m.name, m.loraAdapters])).toEqual([['llama-1b', ['llama-1b-sql']]]);
  const list = (await (await fetch(`${servingUrl}/models`)).json()) as {
    data: { id: string; parent: string | null }[];
  };
  expect(list.data.map((m) => [m.id, m.parent])).toEqual([
    ['llama-1b', null],
    ['llama-1b-sql', 'llama-1b'],
  ]);
});

it('reports, probes and fingerprints the base and the adapter, each by its served name', async () => {
  expect(await states()).toEqual([
    ['llama-1b', 'awake'],
    ['llama-1b-sql', 'awake'],
  ]);
  const probe = probeResponseSchema.parse(
    await post('/v1/probe', { prompt: 'ready?', maxTokens: 4, timeoutMs: 10_000 }),
  );
  expect(probe.results.map((r) => [r.model, r.ok])).toEqual([
    ['llama-1b', true],
    ['llama-1b-sql', true],
  ]);
  const prints = fingerprintResponseSchema.parse(
    await post('/v1/fingerprint', { prompt: FINGERPRINT_PROMPT, maxTokens: 4, timeoutMs: 10_000 }),
  );
  expect(prints.results.map((r) => [r.model, r.ok])).toEqual([
    ['llama-1b', true],
    ['llama-1b-sql', true],
  ]);
});

it('sleeps and wakes the server once for both names', async () => {
  expect(supervisorActionResponseSchema.parse(await post('/v1/vllm/sleep', {}))).toMatchObject({ accepted: true });
  expect(await states()).toEqual([
    ['llama-1b', 'asleep'],
    ['llama-1b-sql', 'asleep'],
  ]);
  expect(supervisorActionResponseSchema.parse(await post('/v1/vllm/wake', {}))).toMatchObject({ accepted: true });
  expect(await states()).toEqual([
    ['llama-1b', 'awake'],
    ['llama-1b-sql', 'awake'],
  ]);
  const state = (await (await fetch(`${servingUrl.replace(/\/v1$/, '')}/_sim/state`)).json()) as { calls: string[] };
  expect(state.calls.filter((c) => c.startsWith('POST /sleep') || c.startsWith('POST /wake_up'))).toEqual([
    'POST /sleep?level=1',
    'POST /wake_up',
  ]);
});
