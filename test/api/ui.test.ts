/// <reference lib="dom" />
/**
 * The fleet page (`/ui`) in a real headless Chromium (Debian's `chromium`, driven by puppeteer-core; no
 * browser is downloaded): it shows the serving domain, the domains' states and the operation in flight, and
 * follows a failover as it happens, read from the DOM. HARU_UI_SCREENSHOT=<file> keeps a screenshot.
 */
import type { Browser } from 'puppeteer-core';
import { tokenDigest } from '../../lib/bearer-auth';
import { call } from './support/harness';
import { type LiveFleet, startLiveFleet } from './support/live-fleet';
import { describeWithTools, type ExternalTool } from '../support/tools';
import { useTestServer } from '../workflows/support/temporal';

jest.setTimeout(120_000);

const CHROMIUM_BIN = '/usr/bin/chromium';
const CHROMIUM: ExternalTool = { probe: [CHROMIUM_BIN, '--version'], install: 'apt-get install -y chromium' };

describeWithTools('the fleet page in headless Chromium', [CHROMIUM], () => {
  const token = 'ui-test-token-0123456789';
  // The page only reads: it is given a key holding `read` alone; the promotion goes with the admin token.
  const viewer = 'ui-viewer-key-0123456789';
  let live: LiveFleet;
  let browser: Browser | undefined;
  const server = useTestServer(async () => {
    await browser?.close();
    await live?.close();
  });
  beforeAll(async () => {
    live = await startLiveFleet(server, {
      config: { HARU_API_TOKEN: token, apiKeys: [{ name: 'viewer', digest: tokenDigest(viewer), scopes: ['read'] }] },
    });
    const puppeteer = await import('puppeteer-core');
    browser = await puppeteer.launch({
      executablePath: CHROMIUM_BIN,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
  });

  it('shows which domain serves and follows a failover to the standby, steps and events included', async () => {
    const page = await browser!.newPage();
    await page.goto(`${live.url}/ui?fleet=${live.slug}#token=${viewer}`);
    const textOf = (id: string) => page.$eval(`#${id}`, (el) => el.textContent ?? '');
    await page.waitForFunction(() => document.getElementById('active')?.textContent === 'east', { timeout: 30_000 });
    expect(await textOf('fleet')).toBe(live.slug);
    expect(await textOf('pause')).toBe('on');
    expect(await page.$$eval('#domains tr', (rows) => rows.map((r) => r.textContent))).toEqual([
      expect.stringMatching(/^eastactiveready/),
      expect.stringMatching(/^weststandbyready/),
    ]);

    const promote = await call(`${live.url}/v1/fleets/${live.slug}/promote`, {
      body: { targetDomainId: 'west', reason: 'ui test' },
      token,
    });
    expect(promote.status).toBe(202);
    // The operation in flight, with its live steps, while it runs.
    await page.waitForFunction(
      () => /promote .*\n(.|\n)*stopTraining: /.test(document.getElementById('operation')!.textContent!),
      {
        timeout: 30_000,
        polling: 50,
      },
    );
    await page.waitForFunction(() => document.getElementById('active')?.textContent === 'west', { timeout: 60_000 });
    await page.waitForFunction(() => document.getElementById('events')!.textContent!.includes('routing.committed'), {
      timeout: 30_000,
    });
    expect(await textOf('events')).toContain('operation.started');
    expect(await page.$$eval('#domains tr.active', (rows) => rows.map((r) => r.firstChild?.textContent))).toEqual([
      'west',
    ]);
    if (process.env.HARU_UI_SCREENSHOT) await page.screenshot({ path: process.env.HARU_UI_SCREENSHOT, fullPage: true });
  });

  it('shows a host that stopped answering as stale, with its age since it was last heard and its slots unknown', async () => {
    const page = await browser!.newPage();
    await page.goto(`${live.url}/ui?fleet=${live.slug}#token=${viewer}`);
    const eastRow = () =>
      page.$$eval('#domains tr', (rows) => rows.find((r) => r.firstChild?.textContent === 'east')?.textContent ?? '');
    await page.waitForFunction(() => /^east.*ago/.test(document.getElementById('domains')!.textContent!), {
      timeout: 30_000,
    });
    expect(await eastRow()).toMatch(/ago(?! STALE)/);
    expect(await eastRow()).not.toContain('unknown');
    await live.fleet.east.sim.kill();
    // Its refusals fail it at once: what its host last said is no longer shown, though it was heard a moment ago.
    const isStaleRow = () =>
      [...document.querySelectorAll('#domains tr.stale')].some((r) => r.firstChild?.textContent === 'east');
    await page.waitForFunction(isStaleRow, { timeout: 60_000, polling: 100 });
    expect(await eastRow()).toMatch(/^eaststandbyfailed.*ago.*gpu0:unknown\[llama-1b\] gpu0:train:unknown$/);
    // Silent past the stale limit: its age since it was last heard, said stale.
    await page.waitForFunction(
      () => /^east.*STALE/m.test([...document.querySelectorAll('#domains tr')].map((r) => r.textContent).join('\n')),
      { timeout: 60_000, polling: 100 },
    );
    expect(await eastRow()).toMatch(/^east.*\d+(\.\d)?m?s ago STALEgpu0:unknown\[llama-1b\]/);
  });

  it('holds no data itself: without the token the page shows the API refusal', async () => {
    const page = await browser!.newPage();
    await page.evaluateOnNewDocument(() => localStorage.clear());
    await page.goto(`${live.url}/ui?fleet=${live.slug}`);
    await page.waitForFunction(() => document.getElementById('error')!.textContent!.startsWith('unauthorized'), {
      timeout: 30_000,
    });
    expect(await page.$eval('#active', (el) => el.textContent)).toBe('…');
  });
});
