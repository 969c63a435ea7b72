import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import type { createTestDatabase } from '../../db/testing';
import { seedLayout } from '../../db/testing';
import { eventually } from '../../test/support/eventually';
import { freePort } from '../../test/support/ports';

const REPO_ROOT = path.resolve(__dirname, '../..');

/** POSTs `body` to `url`; true for a 2xx answer (read to the end). */
export const answers = async (url: string, body: string): Promise<boolean> => {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  await res.text();
  return res.ok;
};

/**
 * The upstream of the proxy benches: one fake vLLM process serving `model` as fast as its timers allow, and a
 * fleet (auto-failover off) whose domains east (active) and west both serve it from there, both `ready`.
 * Resolves once the fake answers `probeBody`.
 */
export async function startBenchFleet(
  db: Awaited<ReturnType<typeof createTestDatabase>>,
  opts: { model: string; slug: string; checkpointDir: string; probeBody: string },
): Promise<{ vllm: ChildProcess; vllmPort: number; direct: string }> {
  const vllmPort = await freePort();
  const vllm = spawn(
    process.execPath,
    [
      '-r',
      require.resolve('tsx/cjs'),
      path.join(REPO_ROOT, 'sim/vllm/main.ts'),
      '--model',
      opts.model,
      '--port',
      String(vllmPort),
      '--tokens-per-second',
      '1000000',
    ],
    { cwd: REPO_ROOT, stdio: 'ignore' },
  );
  const direct = `http://127.0.0.1:${vllmPort}/v1/chat/completions`;
  await eventually('the fake vLLM', () => answers(direct, opts.probeBody), 60_000, 100);
  const domain = (name: string) => ({
    slug: name,
    supervisorUrl: 'http://127.0.0.1:9',
    slots: [
      {
        kind: 'inference' as const,
        gpuIndex: 0,
        models: [{ name: opts.model, servingUrl: `http://127.0.0.1:${vllmPort}/v1` }],
      },
      { kind: 'training' as const, gpuIndex: 0, command: ['true'], checkpointDir: path.join(opts.checkpointDir, name) },
    ],
  });
  const { fleetId } = await seedLayout(db.store, {
    fleet: { slug: opts.slug, activeDomain: 'east', policy: { autoFailover: false } },
    domains: [domain('east'), domain('west')],
  });
  for (const d of (await db.store.fleets.snapshot(fleetId))!.domains) await db.store.domains.transition(d.id, 'ready');
  return { vllm, vllmPort, direct };
}
