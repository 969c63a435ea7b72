import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type RunningApi, startApi } from '../../api/main';
import { createTestDatabase, seedLayout, type TestDatabase } from '../../db/testing';
import { freePort } from '../support/ports';
import { twoDomainLayout } from './support/harness';

/** `haru api` as main.ts starts it: event follows resume from Last-Event-ID and end when the API shuts down. */
describe('following events on a running API', () => {
  let db: TestDatabase;
  let api: RunningApi;
  let dir: string;
  let fleetId: string;
  let fleetSlug: string;
  const token = 'events-token';

  beforeAll(async () => {
    db = await createTestDatabase({ max: 2 });
    const report = await seedLayout(
      db.store,
      twoDomainLayout({ eastUrl: 'http://127.0.0.1:9', westUrl: 'http://127.0.0.1:9' }),
    );
    fleetId = report.fleetId;
    fleetSlug = report.fleetSlug;
    dir = mkdtempSync(path.join(os.tmpdir(), 'haru-events-'));
    // A mounted secret ends in a newline: the token still matches.
    writeFileSync(path.join(dir, 'token'), `${token}\n`, { mode: 0o600 });
    api = await startApi({
      DATABASE_URL: db.url,
      HOST: '127.0.0.1',
      PORT: '0',
      TEMPORAL_ADDRESS: `127.0.0.1:${await freePort()}`,
      HARU_API_TOKEN_FILE: path.join(dir, 'token'),
      LOG_LEVEL: 'error',
    });
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  const follow = (query: string, headers: Record<string, string> = {}, signal?: AbortSignal) =>
    fetch(`${api.url}/v1/fleets/${fleetSlug}/events?follow=1${query}`, {
      headers: { authorization: `Bearer ${token}`, ...headers },
      signal,
    });

  /** Reads the stream until `until` matches the text so far; returns the event messages seen. */
  async function readUntil(
    res: Response,
    until: (text: string) => boolean,
  ): Promise<{ text: string; messages: string[] }> {
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    while (!until(text)) {
      const r = await reader.read();
      if (r.done) break;
      text += decoder.decode(r.value, { stream: true });
    }
    await reader.cancel().catch(() => {});
    const messages = [...text.matchAll(/^data: (.*)$/gm)].map(
      (m) => (JSON.parse(m[1]!) as { message: string }).message,
    );
    return { text, messages };
  }

  it('resumes after Last-Event-ID when the URL still carries the first ?after= cursor', async () => {
    const e1 = await db.store.events.append({ fleetId, type: 'test', message: 'resume-1' });
    const e2 = await db.store.events.append({ fleetId, type: 'test', message: 'resume-2' });
    await db.store.events.append({ fleetId, type: 'test', message: 'resume-3' });
    const ctrl = new AbortController();
    const res = await follow(`&after=${e1.id - 1}`, { 'last-event-id': String(e2.id) }, ctrl.signal);
    expect(res.status).toBe(200);
    const { messages } = await readUntil(res, (t) => t.includes('resume-3'));
    ctrl.abort();
    expect(messages).toEqual(['resume-3']);
  });

  it('serves many followers of a fleet from one feed, and refuses one past HARU_EVENTS_MAX_FOLLOWERS with 429', async () => {
    const capped = await startApi({
      DATABASE_URL: db.url,
      HOST: '127.0.0.1',
      PORT: '0',
      TEMPORAL_ADDRESS: `127.0.0.1:${await freePort()}`,
      HARU_API_TOKEN: token,
      HARU_EVENTS_MAX_FOLLOWERS: '3',
      LOG_LEVEL: 'error',
    });
    const ctrl = new AbortController();
    try {
      const open = (after: string) =>
        fetch(`${capped.url}/v1/fleets/${fleetSlug}/events?follow=1${after}`, {
          headers: { authorization: `Bearer ${token}` },
          signal: ctrl.signal,
        });
      const first = await db.store.events.append({ fleetId, type: 'test', message: 'many-1' });
      const followers = await Promise.all([
        open(`&after=${first.id - 1}`),
        open(`&after=${first.id - 1}`),
        open(`&after=${first.id}`),
      ]);
      expect(followers.map((r) => r.status)).toEqual([200, 200, 200]);
      const refused = await open('');
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('5');
      expect(await refused.json()).toEqual({
        error: { code: 'overloaded', message: 'this API process has 3 event followers (HARU_EVENTS_MAX_FOLLOWERS)' },
      });
      await db.store.events.append({ fleetId, type: 'test', message: 'many-2' });
      const seen = await Promise.all(followers.map((r) => readUntil(r, (t) => t.includes('many-2'))));
      expect(seen.map((s) => s.messages)).toEqual([['many-1', 'many-2'], ['many-1', 'many-2'], ['many-2']]);
    } finally {
      ctrl.abort();
      await capped.close();
    }
  });

  it('ends a connected follower within a bound when the API shuts down, and close resolves', async () => {
    const res = await follow('');
    expect(res.status).toBe(200);
    const reading = readUntil(res, () => false);
    // The follower's headers came, so it is connected before the shutdown starts.
    let closed = false;
    const closing = api.close().then(() => (closed = true));
    const { text } = await reading;
    // Ended by the API with its comment (not cut after the grace for requests in flight), before close resolved.
    expect(text).toContain(': api shutting down');
    expect(closed).toBe(false);
    await closing;
  });
});
