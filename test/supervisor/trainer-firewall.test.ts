/**
 * The host kit's trainer firewall, for real: `haru supervisor --trainer-firewall` renders nftables rules from the
 * supervisor's own config and applies them; then a trainer's uid (nobody) cannot reach a vLLM server's admin
 * routes (which take no credential: `POST /sleep` would put the active's engine to sleep) nor its inference
 * routes nor the supervisor, while the supervisor's uid still drives the engine and the trainer's own loopback
 * servers (torch.distributed's rendezvous) still work. Removing the rules lets the trainer through again.
 */
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { createFakeVllm, type FakeVllm } from '../../sim/vllm/server';
import { lookUpUser } from '../../supervisor/run-as';
import { type RunningSupervisor, startSupervisor } from '../../supervisor/main';
import { TRAINER_FIREWALL_TABLE } from '../../supervisor/trainer-firewall';
import { describeWithTools, NFT } from '../support/tools';
import { REPO_ROOT } from './support';

const nobody = lookUpUser('nobody');
const isRoot = process.getuid?.() === 0;
if (!isRoot || !nobody) console.warn('skipping the trainer firewall test: it needs root and a user nobody');

/** `node -e script` as `uid`, asynchronously: the servers it calls run in this process. Its output, trimmed. */
async function nodeAs(uid: number, gid: number, script: string): Promise<string> {
  const { stdout } = await promisify(execFile)(
    'setpriv',
    [`--reuid=${uid}`, `--regid=${gid}`, '--clear-groups', '--', process.execPath, '-e', script],
    { encoding: 'utf8' },
  );
  return stdout.trim();
}

/** What one connection from `uid` to a local URL came to: an HTTP status, or the connection's error code. */
function reachAs(uid: number, gid: number, method: string, url: string): Promise<string> {
  const script = `fetch(${JSON.stringify(url)}, { method: ${JSON.stringify(method)}, signal: AbortSignal.timeout(5000) })
    .then((r) => console.log(String(r.status)), (e) => console.log(e.cause?.code ?? e.name))`;
  return nodeAs(uid, gid, script);
}

/** Whether `uid` can serve on a loopback port of its own and connect to it (a trainer's rendezvous). */
function ownLoopbackWorksAs(uid: number, gid: number): Promise<string> {
  const script = `const http = require('node:http');
    const s = http.createServer((q, r) => r.end('ok')).listen(0, '127.0.0.1', () =>
      fetch('http://127.0.0.1:' + s.address().port).then((r) => r.text(), (e) => e.cause?.code ?? e.name)
        .then((t) => { console.log(t); s.close(); }));`;
  return nodeAs(uid, gid, script);
}

/** `haru supervisor --trainer-firewall` with this supervisor config: applies the rules, prints them. */
function applyFirewall(config: object, supervisorPort: number): string {
  const run = spawnSync(process.execPath, [path.join(REPO_ROOT, 'bin/haru.js'), 'supervisor', '--trainer-firewall'], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH, HARU_SUPERVISOR_CONFIG: JSON.stringify(config), PORT: String(supervisorPort) },
  });
  if (run.status !== 0) throw new Error(`--trainer-firewall exited ${run.status}: ${run.stderr}`);
  return run.stdout;
}

const describeFirewall = (title: string, body: () => void) =>
  isRoot && nobody ? describeWithTools(title, [NFT], body) : describe.skip(title, body);

describeFirewall('the trainer firewall', () => {
  let vllm: FakeVllm;
  let vllmPort: number;
  let supervisor: RunningSupervisor;
  beforeAll(async () => {
    vllm = createFakeVllm({ model: 'm', port: 0, gpuIndex: 0, tokensPerSecond: 10_000, onCrash: () => {} });
    vllmPort = await vllm.listen();
    const config = { inference: [{ gpuIndex: 0, models: [{ name: 'm', port: vllmPort }] }] };
    supervisor = await startSupervisor(
      { HARU_SUPERVISOR_CONFIG: JSON.stringify(config), PORT: '0' },
      { write: () => {}, warn: () => {}, trainingOutput: 'ignore' },
    );
  });
  afterAll(async () => {
    spawnSync('nft', ['delete', 'table', 'inet', TRAINER_FIREWALL_TABLE]);
    await supervisor?.shutdown(0);
    await vllm?.close();
  });

  it('keeps a runAs trainer off the engine and the supervisor, and nobody else', async () => {
    const supervisorPort = (supervisor.server.address() as AddressInfo).port;
    const config = {
      inference: [{ gpuIndex: 0, models: [{ name: 'm', port: vllmPort }] }],
      training: [{ gpuIndex: 1, command: ['python3', 'train.py'], checkpointDir: '/tmp/c', runAs: 'nobody' }],
    };
    const { uid, gid } = nobody!;
    const vllmUrl = `http://127.0.0.1:${vllmPort}`;
    const supervisorUrl = `http://127.0.0.1:${supervisorPort}`;
    // Before: anything on the host reaches vLLM's admin routes, which take no credential.
    expect(await reachAs(uid, gid, 'GET', `${vllmUrl}/is_sleeping`)).toBe('200');

    const script = applyFirewall(config, supervisorPort);
    expect(script).toContain(
      `meta skuid { ${uid} } tcp dport { ${[vllmPort, supervisorPort].sort((a, b) => a - b).join(', ')} }`,
    );
    expect(execFileSync('nft', ['list', 'table', 'inet', TRAINER_FIREWALL_TABLE], { encoding: 'utf8' })).toMatch(
      /reject with tcp reset/,
    );

    // The trainer's uid: refused at once, whatever the route; the engine stays awake.
    expect(await reachAs(uid, gid, 'POST', `${vllmUrl}/sleep?level=1`)).toBe('ECONNREFUSED');
    expect(await reachAs(uid, gid, 'POST', `${vllmUrl}/wake_up`)).toBe('ECONNREFUSED');
    expect(await reachAs(uid, gid, 'GET', `${vllmUrl}/v1/models`)).toBe('ECONNREFUSED');
    expect(await reachAs(uid, gid, 'GET', `${supervisorUrl}/healthz`)).toBe('ECONNREFUSED');
    expect(await (await fetch(`${vllmUrl}/is_sleeping`)).json()).toEqual({ is_sleeping: false });
    // Its own loopback servers still work.
    expect(await ownLoopbackWorksAs(uid, gid)).toBe('ok');
    // The supervisor's uid (this process) still drives the engine.
    expect((await fetch(`${vllmUrl}/sleep?level=1`, { method: 'POST' })).status).toBe(200);
    expect(await (await fetch(`${vllmUrl}/is_sleeping`)).json()).toEqual({ is_sleeping: true });
    expect((await fetch(`${vllmUrl}/wake_up`, { method: 'POST' })).status).toBe(200);
    expect((await fetch(`${supervisorUrl}/healthz`)).status).toBe(200);

    // Applied again without a runAs slot, the table is gone: the rules were what refused.
    const removed = applyFirewall({ inference: config.inference }, supervisorPort);
    expect(removed).not.toContain('skuid');
    expect(spawnSync('nft', ['list', 'table', 'inet', TRAINER_FIREWALL_TABLE]).status).not.toBe(0);
    expect(await reachAs(uid, gid, 'GET', `${vllmUrl}/is_sleeping`)).toBe('200');
  });
});
