/**
 * nginx following route intent (deploy/route-intent/nginx.ts) in front of a running API and two model servers:
 * the real nginx serves the active, moves to the new active after a promotion, and answers 503 once no domain
 * is eligible. The follower's rendered files are included by nginx as they are.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { followRouteIntent } from '../../deploy/route-intent/nginx';
import { type Harness, moveRoute, startHarness, twoDomainLayout } from '../api/support/harness';
import { type FakeUpstream, startFakeUpstream } from '../api/support/upstream';
import { eventually } from '../support/eventually';
import { freePort } from '../support/ports';
import { writeNginxMain } from '../support/nginx';
import { describeWithTools, NGINX } from '../support/tools';

jest.setTimeout(60_000);
const model = 'test-model';

describeWithTools('nginx following route intent', [NGINX], () => {
  let dir: string;
  let east: FakeUpstream;
  let west: FakeUpstream;
  let h: Harness;
  let nginx: ChildProcess | undefined;
  let nginxExited: Promise<unknown>;
  let base: string;
  let nginxArgs: string[];

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'haru-route-intent-nginx-'));
    east = await startFakeUpstream('east');
    west = await startFakeUpstream('west');
    h = await startHarness({});
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    nginxArgs = writeNginxMain(
      dir,
      `include ${path.join(dir, 'upstreams.conf')};\n` +
        `  server {\n    listen 127.0.0.1:${port};\n    include ${path.join(dir, 'locations.conf')};\n  }`,
    ).args;
  });
  afterAll(async () => {
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
    const text = await res.text();
    return { status: res.status, text };
  };

  it('serves the active, follows a promotion, and answers 503 when no domain is eligible', async () => {
    const fleet = await h.seed(twoDomainLayout({ eastUrl: east.url, westUrl: `${west.url}/v1` }));
    const follower = followRouteIntent({
      apiUrl: h.url,
      fleet: fleet.slug,
      dir,
      reload: () => {
        if (!nginx) {
          execFileSync('nginx', ['-t', '-q', ...nginxArgs], { stdio: 'pipe' });
          nginx = spawn('nginx', nginxArgs, { stdio: 'ignore' });
          nginxExited = new Promise((resolve) => nginx!.once('exit', resolve));
        } else execFileSync('nginx', [...nginxArgs, '-s', 'reload'], { stdio: 'pipe' });
      },
    });
    expect(await follower.tick()).toBe(true);
    expect(await follower.tick()).toBe(false); // nothing changed: no reload
    await eventually('nginx to serve the active', async () =>
      (await ask().catch(() => null))?.text.includes('east:ok'),
    );
    expect(east.seen.at(-1)?.path).toBe('/v1/chat/completions');

    await moveRoute(h.store, fleet, 'west');
    expect(await follower.tick()).toBe(true);
    await eventually('nginx to follow the promotion', async () => (await ask()).text.includes('west:ok'));
    expect(west.seen.at(-1)?.path).toBe('/v1/chat/completions');

    const westDomain = fleet.domains.find((d) => d.slug === 'west')!;
    await h.store.domains.transition(westDomain.id, 'failed');
    expect(await follower.tick()).toBe(true);
    await eventually('nginx to refuse a fleet without an eligible domain', async () => (await ask()).status === 503);
    expect(JSON.parse((await ask()).text)).toMatchObject({ error: { code: 'domain_unavailable' } });
  });
});
