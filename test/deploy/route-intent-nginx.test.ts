/**
 * `haru gateway nginx` (cli/commands/gateway.ts over deploy/route-intent/nginx.ts) in front of a running API and
 * two model servers, as an operator runs it: a child process beside a real nginx. nginx serves the active,
 * follows a promotion while clients keep sending (no request fails: nginx's reload lets its old workers finish),
 * and answers 503 once no domain is eligible. A configuration nginx refuses is taken back.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { followRouteIntent } from '../../deploy/route-intent/nginx';
import { routeIntentSchema } from '../../schemas/route-intent';
import { type Harness, moveRoute, startHarness, twoDomainLayout } from '../api/support/harness';
import { type FakeUpstream, startFakeUpstream } from '../api/support/upstream';
import { HARU, ROOT } from '../dev/support';
import { eventually } from '../support/eventually';
import { freePort } from '../support/ports';
import { writeNginxMain } from '../support/nginx';
import { describeWithTools, NGINX } from '../support/tools';

jest.setTimeout(90_000);
const model = 'test-model';

describeWithTools('haru gateway nginx', [NGINX], () => {
  let dir: string;
  let east: FakeUpstream;
  let west: FakeUpstream;
  let h: Harness;
  let nginx: ChildProcess | undefined;
  let nginxExited: Promise<unknown>;
  let gateway: ChildProcess | undefined;
  let gatewayOut = '';
  let base: string;
  let nginxCommand: string;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'haru-gateway-nginx-'));
    east = await startFakeUpstream('east');
    west = await startFakeUpstream('west');
    h = await startHarness({});
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    const { args } = writeNginxMain(
      dir,
      `include ${path.join(dir, 'upstreams.conf')};\n` +
        `  server {\n    listen 127.0.0.1:${port};\n    include ${path.join(dir, 'locations.conf')};\n  }`,
    );
    nginxCommand = ['nginx', ...args].join(' ');
    // nginx runs before the gateway, on empty include files, as a host's nginx does.
    writeFileSync(path.join(dir, 'upstreams.conf'), '');
    writeFileSync(path.join(dir, 'locations.conf'), '');
    nginx = spawn('nginx', args, { stdio: 'ignore' });
    nginxExited = new Promise((resolve) => nginx!.once('exit', resolve));
  });
  afterAll(async () => {
    gateway?.kill('SIGKILL');
    if (nginx && nginx.exitCode === null) {
      nginx.kill('SIGQUIT');
      await nginxExited;
    }
    await h?.close();
    await east?.close();
    await west?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const ask = async () => {
    const res = await fetch(`${base}/models/${model}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [] }),
    });
    return { status: res.status, text: await res.text() };
  };

  it('serves the active, follows a promotion under load with no failed request, and 503s with no eligible domain', async () => {
    const fleet = await h.seed(twoDomainLayout({ eastUrl: east.url, westUrl: `${west.url}/v1` }));
    gateway = spawn(
      process.execPath,
      [HARU, 'gateway', 'nginx', '--server', h.url, '--fleet', fleet.slug, '--dir', dir, '--nginx', nginxCommand],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    gateway.stdout!.on('data', (c: Buffer) => (gatewayOut += c.toString()));
    gateway.stderr!.on('data', (c: Buffer) => (gatewayOut += c.toString()));
    const gatewayExited = new Promise<number | null>((resolve) => gateway!.once('exit', resolve));
    await eventually('nginx to serve the active', async () =>
      (await ask().catch(() => null))?.text.includes('east:ok'),
    );
    expect(gatewayOut).toMatch(new RegExp(`fleet ${fleet.slug} route revision \\d+: active east; nginx reloaded`));
    expect(east.seen.at(-1)?.path).toBe('/v1/chat/completions');

    // Clients keep sending through the promotion, through the OpenAI SDK as users do: at a reload nginx closes
    // its idle keep-alive connections, and a request sent on one as it closes is sent again by the SDK (it
    // retries a connection error, twice by default), as it would be by any client that retries one.
    const openai = new OpenAI({ baseURL: `${base}/models/${model}/v1`, apiKey: 'unused' });
    const answers: { status: number; text: string }[] = [];
    let sending = true;
    const clients = Array.from({ length: 4 }, async () => {
      while (sending) {
        answers.push(
          await openai.chat.completions
            .create({ model, messages: [{ role: 'user', content: 'hi' }] })
            .then((r) => ({ status: 200, text: r.choices[0]?.message.content ?? '' }))
            .catch((err: Error) => ({ status: 0, text: err.message })),
        );
      }
    });
    await eventually('answers before the promotion', () => answers.length >= 20);
    await moveRoute(h.store, fleet, 'west');
    await eventually('nginx to follow the promotion', () => answers.at(-1)?.text.includes('west:ok'));
    await eventually('more answers after it', () => answers.filter((a) => a.text.includes('west:ok')).length >= 20);
    sending = false;
    await Promise.all(clients);
    expect(answers.filter((a) => a.status !== 200)).toEqual([]);
    expect(answers.some((a) => a.text.includes('east:ok'))).toBe(true);
    expect(west.seen.at(-1)?.path).toBe('/v1/chat/completions');

    const westDomain = fleet.domains.find((d) => d.slug === 'west')!;
    await h.store.domains.transition(westDomain.id, 'failed');
    await eventually('nginx to refuse a fleet without an eligible domain', async () => (await ask()).status === 503);
    expect(JSON.parse((await ask()).text)).toMatchObject({ error: { code: 'domain_unavailable' } });

    gateway.kill('SIGTERM');
    expect(await gatewayExited).toBe(0);
  });

  it('takes back a configuration nginx refuses, so nginx keeps what it has', async () => {
    const fleet = await h.seed(twoDomainLayout({ slug: 'refused', eastUrl: east.url, westUrl: west.url }));
    const own = mkdtempSync(path.join(os.tmpdir(), 'haru-gateway-refused-'));
    try {
      writeFileSync(path.join(own, 'upstreams.conf'), '# as it was\n');
      const follower = followRouteIntent({
        read: async () =>
          routeIntentSchema.parse(await (await fetch(`${h.url}/v1/fleets/${fleet.slug}/route-intent`)).json()),
        dir: own,
        check: () => {
          throw new Error('nginx: [emerg] unexpected "}"');
        },
        reload: () => {
          throw new Error('no reload after a refused test');
        },
      });
      await expect(follower.tick()).rejects.toThrow('unexpected "}"');
      expect(readFileSync(path.join(own, 'upstreams.conf'), 'utf8')).toBe('# as it was\n');
      expect(() => readFileSync(path.join(own, 'locations.conf'))).toThrow(/ENOENT/);
    } finally {
      rmSync(own, { recursive: true, force: true });
    }
  });
});
