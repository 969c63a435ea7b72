/// <reference lib="dom" />
/**
 * The fleet page (`/ui`) on a running stack: real supervisors of a simulated fleet, the worker and its monitor on
 * the dev server, the API over HTTP on its real store, read in a real headless Chromium (Debian's `chromium`
 * through puppeteer-core; no browser is downloaded) with JavaScript off (a second page with it on, opened once,
must follow the failover in place), signed in with a `read` key through the
 * browser's own prompt (HTTP Basic). It asserts what an on-call engineer reads: roles, ages, models, training,
 * GPU memory, the "no standby ready" warning once the old active died, the failover's steps with their times,
 * the pause and the last failed operation, hostile text shown as text. Screenshots go to .haru/test-output/ui/
 * (docs/ui.png is a copy of its 2-failed-over.png).
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'puppeteer-core';
import { tokenDigest } from '../../lib/bearer-auth';
import { call } from './support/harness';
import { type LiveFleet, startLiveFleet } from './support/live-fleet';
import { describeWithTools, type ExternalTool } from '../support/tools';
import { eventually, useTestServer } from '../workflows/support/temporal';

jest.setTimeout(240_000);

const CHROMIUM_BIN = '/usr/bin/chromium';
const CHROMIUM: ExternalTool = { probe: [CHROMIUM_BIN, '--version'], install: 'apt-get install -y chromium' };
const SHOTS = path.join(__dirname, '../../.haru/test-output/ui');
/** Where the page is told the Temporal Web UI runs (the test server has none: the links are read, not followed). */
const TEMPORAL_UI = 'http://127.0.0.1:8233';
const HOSTILE = `<img src=x onerror="document.title='pwned'"><script>document.title='pwned'</script>`;

describeWithTools('the fleet page in headless Chromium', [CHROMIUM], () => {
  const token = 'ui-test-token-0123456789';
  // The page is read with a key holding `read` alone; pause and promotion go with the admin token.
  const viewer = 'ui-viewer-key-0123456789';
  const chat = 'ui-chat-key-0123456789';
  let live: LiveFleet;
  let browser: Browser | undefined;
  let page: Page;
  /** The page with JavaScript on, opened once and never navigated again: it must follow the fleet by itself. */
  let livePage: Page;
  const cspErrors: string[] = [];
  const server = useTestServer(async () => {
    await browser?.close();
    await live?.close();
  });
  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    live = await startLiveFleet(server, {
      config: {
        HARU_API_TOKEN: token,
        HARU_TEMPORAL_UI_URL: TEMPORAL_UI,
        apiKeys: [
          { name: 'viewer', digest: tokenDigest(viewer), scopes: ['read'] },
          { name: 'chat', digest: tokenDigest(chat), scopes: ['inference'] },
        ],
      },
    });
    const puppeteer = await import('puppeteer-core');
    browser = await puppeteer.launch({
      executablePath: CHROMIUM_BIN,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
    page = await browser.newPage();
    await page.setJavaScriptEnabled(false);
    await page.setViewport({ width: 1400, height: 900 });
    await page.authenticate({ username: 'oncall', password: viewer });
    livePage = await browser.newPage();
    await livePage.setViewport({ width: 1400, height: 900 });
    await livePage.authenticate({ username: 'oncall', password: viewer });
    livePage.on('console', (m) => {
      if (/Content Security Policy/i.test(m.text())) cspErrors.push(m.text());
    });
  });

  const textOf = (selector: string) => page.$eval(selector, (el) => (el as HTMLElement).innerText);
  /** A domain's row: its role and what it reads. */
  const row = (slug: string) =>
    page.$eval(`tr[data-domain="${slug}"]`, (el) => ({
      role: el.getAttribute('data-role'),
      text: (el as HTMLElement).innerText,
    }));
  /** Loads the page again (as its meta refresh does every 5 s) until `check` holds. */
  const reloadUntil = (what: string, check: () => Promise<boolean>, timeoutMs = 90_000) =>
    eventually(
      what,
      async () => {
        await page.goto(`${live.url}/ui/fleets/${live.slug}`);
        return check();
      },
      timeoutMs,
      500,
    );
  const shoot = (name: string) => page.screenshot({ path: path.join(SHOTS, name), fullPage: true });

  it('shows the active awake and the standby asleep and training, ready to take over, with ages and GPU memory', async () => {
    const res = await page.goto(`${live.url}/ui`);
    // One fleet visible: the list sends the browser to its page.
    expect(res?.status()).toBe(200);
    expect(page.url()).toBe(`${live.url}/ui/fleets/${live.slug}`);
    expect(await textOf('#active')).toBe('east');
    await reloadUntil('both domains heard, with GPU memory', async () => /GiB/.test((await row('west')).text));

    const east = await row('east');
    expect(east.role).toBe('active');
    expect(east.text).toMatch(/^east\s+ACTIVE\s+ready\s+\d+ s ago\s/);
    expect(east.text).toMatch(/llama-1b awake/);
    expect(east.text).toMatch(/GPU 0: \d+\.\d \/ \d+\.\d GiB/);
    const west = await row('west');
    expect(west.role).toBe('standby');
    expect(west.text).toMatch(/^west\s+STANDBY\s+ready\s+\d+ s ago\s/);
    expect(west.text).toMatch(/llama-1b asleep/);
    expect(west.text).toMatch(/GPU 0: training/);
    expect(west.text).toMatch(/ready to take over/);
    expect(await textOf('#warnings')).not.toMatch(/No standby ready/);
    expect(await page.$$('.alert.critical')).toHaveLength(0);
    expect(await textOf('#auto-failover')).toBe('auto-failover on');
    expect(await textOf('#held')).toBe('held requests: 0 of at most 1000 (this API process)');
    await shoot('1-healthy.png');

    // No script runs here (JavaScript is off), yet the page reloads itself.
    const reloaded = page.waitForNavigation({ timeout: 15_000 });
    await expect(reloaded).resolves.not.toBeNull();

    // With JavaScript on, the page is opened once and marked; the next test sees it follow the failover.
    await livePage.goto(`${live.url}/ui/fleets/${live.slug}`);
    await livePage.evaluate(() => Object.assign(window, { openedOnce: true }));
  });

  it('after the active’s host dies: the old active failed, never standby, no standby ready, the failover’s steps timed', async () => {
    await live.fleet.east.sim.kill();
    await reloadUntil('west serving', async () => (await textOf('#active')) === 'west');
    // The page opened before the kill shows it too, updated in place: never reloaded (its mark is still there),
    // its script allowed by the page's CSP.
    await livePage.waitForFunction(
      () =>
        document.querySelector('#active')?.textContent?.trim() === 'west' &&
        document.querySelector('tr[data-domain="east"]')?.getAttribute('data-role') === 'failed',
      { timeout: 60_000, polling: 250 },
    );
    expect(await livePage.evaluate(() => (window as { openedOnce?: boolean }).openedOnce)).toBe(true);
    expect(cspErrors).toEqual([]);
    await reloadUntil('east failed', async () => (await row('east')).role === 'failed');
    const east = await row('east');
    expect(east.text).toMatch(/^east\s+FAILED\s+failed/);
    expect(east.text).toMatch(/llama-1b unknown/);
    expect(east.text).toMatch(/not ready: it is failed/);
    expect((await row('west')).role).toBe('active');
    expect(await textOf('#warnings')).toContain('No standby ready: auto-failover could not move traffic');

    // The promotion, once its commit is done: what, from where, how long ago, each step with its time.
    const promotion = '#operations li.op';
    await reloadUntil('the promotion past its commit', async () =>
      /commitRouting: succeeded/.test(await textOf(promotion)),
    );
    const op = await textOf(promotion);
    expect(op).toMatch(
      /promote → west \(from east\) · (running|succeeded( \(not demoted\))?) · requested \d+ s ago · duration \d/,
    );
    for (const step of ['stopTraining', 'verifyGpuReleased', 'wakeModels', 'probeModels', 'commitRouting']) {
      expect(op).toMatch(new RegExp(`${step}: succeeded \\d+(\\.\\d)? m?s\\b`));
    }
    expect(await page.$$(`${promotion} .steps li`)).not.toHaveLength(0);
    // Its workflow, linked to the Temporal Web UI's page of it.
    const [operation] = await live.fleet.db.store.operations.list(live.fleet.fleetId);
    const link = await page.$eval(`${promotion} a[href^="${TEMPORAL_UI}"]`, (a) => ({
      href: a.getAttribute('href'),
      text: (a as HTMLElement).innerText,
    }));
    expect(link).toEqual({
      href: `${TEMPORAL_UI}/namespaces/default/workflows/${encodeURIComponent(operation!.workflowId)}`,
      text: operation!.workflowId,
    });
    await shoot('2-failed-over.png');
  });

  it('shows who paused auto-failover and the last failed operation with its error, hostile text as text', async () => {
    const pause = await call(`${live.url}/v1/fleets/${live.slug}/pause`, { body: { reason: HOSTILE }, token });
    expect(pause.status).toBe(200);
    const store = live.fleet.db.store;
    // The promotion has ended (its old active's demotion is best effort) before another operation can start.
    await eventually(
      'the promotion ended',
      async () => (await store.operations.list(live.fleet.fleetId))[0]!.finishedAt !== null,
      120_000,
    );
    const { operation } = await store.operations.create({
      fleetId: live.fleet.fleetId,
      kind: 'promote',
      targetDomainId: live.fleet.east.id,
      reason: HOSTILE,
      requestedBy: 'api:oncall',
    });
    await store.operations.fail(operation.id, { step: 'probeModels', code: 'ProbeFailed', message: HOSTILE });

    await page.goto(`${live.url}/ui/fleets/${live.slug}`);
    const warnings = await textOf('#warnings');
    expect(warnings).toMatch(new RegExp(`Auto-failover paused by api:default \\d+ s ago: `));
    expect(warnings).toContain(HOSTILE);
    expect(await textOf('#auto-failover')).toBe('auto-failover paused');
    const lastFailed = await textOf('#last-failed');
    expect(lastFailed).toContain(`error: probeModels: ProbeFailed: ${HOSTILE}`);
    expect(lastFailed).toMatch(/promote → east \(from west\) · failed · requested \d+ s ago/);
    expect(await page.$$('body img, body script')).toHaveLength(0);
    expect(await page.title()).not.toBe('pwned');
    await shoot('3-paused-last-failed.png');
  });

  it('asks for a key: none is 401 with a Basic challenge, a key without `read` is 403, and neither shows the fleet', async () => {
    const url = `${live.url}/ui/fleets/${live.slug}`;
    const none = await call(url);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Basic realm="haru"/);
    const basic = (secret: string) => ({ authorization: `Basic ${Buffer.from(`x:${secret}`).toString('base64')}` });
    const refused = await call(url, { headers: basic(chat) });
    expect(refused.status).toBe(403);
    expect(refused.body.error.message).toContain('lacks the "read" scope');
    expect((await call(url, { headers: basic(viewer) })).status).toBe(200);

    // Browser contexts of their own: no credentials cached from the pages above. Without a key the browser is
    // asked for one (headless, it cannot prompt: the navigation fails); with a key lacking `read`, a 403.
    const stranger = await (await browser!.createBrowserContext()).newPage();
    await expect(stranger.goto(url)).rejects.toThrow(/ERR_INVALID_AUTH_CREDENTIALS/);
    const chatter = await (await browser!.createBrowserContext()).newPage();
    await chatter.authenticate({ username: 'chat', password: chat });
    const res = await chatter.goto(url);
    expect(res?.status()).toBe(403);
    expect(await chatter.content()).not.toMatch(/east|west|llama/);
  });
});
