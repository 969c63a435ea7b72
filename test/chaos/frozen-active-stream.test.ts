/**
 * Chaos: the active's model servers freeze (every fake vLLM process SIGSTOPped: the kernel accepts
 * connections, nothing answers, no reset comes) while a stream through the proxy has relayed tokens. The
 * monitor fails the active over, and when the route moves the proxy cuts the stream from the frozen host and
 * continues it on the new active: the client reads one whole stream, not a stall that lasts as long as the
 * freeze. The fleet then fails over again.
 */
import OpenAI from 'openai';
import type { Counter } from 'prom-client';
import { signalPid } from '../../sim/processes';
import { monitorWorkflowId } from '../../workflows/definitions';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { type ChaosApi, startChaosApi } from './support/api';
import { activeOf, killAndFailOver, untilViableStandby } from './support/failover-again';
import { type ChaosRig, startChaosRig } from './support/rig';

jest.setTimeout(300_000);

let rig: ChaosRig | undefined;
let api: ChaosApi | undefined;
const frozen = new Set<number>();
const thaw = () => {
  for (const pid of frozen) signalPid(pid, 'SIGCONT');
  frozen.clear();
};
const server = useTestServer(async () => {
  thaw();
  await api?.close();
  await rig?.close();
});

const question = [{ role: 'user' as const, content: 'tell me something' }];
const sdk = (baseURL: string, headers: Record<string, string> = {}) =>
  new OpenAI({ baseURL, apiKey: 'x', maxRetries: 0, defaultHeaders: headers });

async function counter(c: Counter<string>, labels: Record<string, string>): Promise<number> {
  const { values } = await c.get();
  return values
    .filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))
    .reduce((n, v) => n + v.value, 0);
}

it('a stream in flight when the active freezes finishes from the new active once the monitor fails over', async () => {
  const taskQueue = uniqueTaskQueue('chaos-frozen-stream');
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue,
    policy: { autoFailover: true },
  });
  const { fleet } = rig;
  await rig.startWorker();
  api = await startChaosApi({ databaseUrl: fleet.db.url, temporalAddress: rig.temporalAddress, taskQueue });
  const monitor = server.client.workflow.getHandle(monitorWorkflowId(fleet.fleetId));
  await untilViableStandby(monitor, fleet.west);
  const model = fleet.east.sim.models[0]!.name;
  // Slow enough that the stream is still generating when its host freezes.
  await fleet.east.sim.faults.set(model, { tokensPerSecond: 4 });
  let movedAt = 0;
  api.api.cache.onMove(() => {
    movedAt ||= Date.now();
  });
  const succeeded = await counter(api.api.metrics.resends, { kind: 'stream', outcome: 'succeeded' });

  const stream = await sdk(`${api.url}/v1`, { 'x-haru-fleet': fleet.layout.fleet.slug }).chat.completions.create({
    model,
    messages: question,
    max_tokens: 12,
    stream: true,
  });
  const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
  let contentChunks = 0;
  let frozenAt = 0;
  for await (const chunk of stream) {
    chunks.push(chunk);
    if (chunk.choices[0]?.delta.content) contentChunks += 1;
    if (contentChunks === 3 && !frozenAt) {
      for (const m of fleet.east.sim.models) {
        signalPid(m.pid, 'SIGSTOP');
        frozen.add(m.pid);
      }
      frozenAt = Date.now();
    }
  }
  const endedAt = Date.now();

  expect(await activeOf(fleet)).toBe(fleet.west.id);
  const [operation] = await fleet.db.store.operations.list(fleet.fleetId);
  expect(operation).toMatchObject({ kind: 'promote', targetDomainId: fleet.west.id, requestedBy: 'monitor' });
  expect(movedAt).toBeGreaterThan(frozenAt);
  // Cut at the move: the frozen host never answers again while the test runs.
  expect(endedAt - movedAt).toBeLessThan(10_000);
  console.log(
    `frozen active: SIGSTOP -> route moved in ${movedAt - frozenAt} ms -> stream ended ${endedAt - movedAt} ms later`,
  );

  // One stream, as the new active alone would have answered it.
  const reference = await sdk(fleet.west.servingUrl).chat.completions.create({
    model,
    messages: question,
    max_tokens: 12,
  });
  expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe(reference.choices[0]?.message.content);
  expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
  expect(chunks.filter((c) => c.choices[0]?.delta.role !== undefined)).toHaveLength(1);
  expect(chunks.filter((c) => c.choices[0]?.finish_reason)).toHaveLength(1);
  expect(await counter(api.api.metrics.resends, { kind: 'stream', outcome: 'succeeded' })).toBe(succeeded + 1);

  // Thawed, east is put back as a standby, and the fleet fails over to it.
  thaw();
  await fleet.east.sim.faults.clear(model);
  await untilViableStandby(monitor, fleet.east, 180_000);
  await killAndFailOver(fleet, fleet.west, fleet.east);
  await eventually('the proxy to serve from east', async () => {
    const answer = await sdk(`${api!.url}/v1`, { 'x-haru-fleet': fleet.layout.fleet.slug })
      .chat.completions.create({ model, messages: question, max_tokens: 2 })
      .catch(() => null);
    return answer?.choices[0]?.message.content;
  });
});
