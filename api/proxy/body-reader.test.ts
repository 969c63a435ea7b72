import type { IncomingMessage, ServerResponse } from 'node:http';
import net from 'node:net';
import express from 'express';
import { toHaruError } from '../errors';
import { listenLocal, type LocalServer } from '../../test/support/local-server';
import { createBodyBudget } from './body-budget';
import { readRawBody } from './body-reader';

const LIMIT = 64;

/** What a reader made of a request: the body's bytes (or none), or the error's shape and its API code. */
type Outcome = { body: string | null } | { status: unknown; type: unknown; message: string; code: string };

const describeError = (err: Error & { status?: unknown; type?: unknown }): Outcome => ({
  status: err.status,
  type: err.type,
  message: err.message,
  code: toHaruError(err).code,
});

/** A server that reads each request with `read` and records (and answers) what came of it. */
async function recorder(read: (req: IncomingMessage, res: ServerResponse, done: (o: Outcome) => void) => void) {
  const outcomes: Outcome[] = [];
  const server = await listenLocal((req, res) =>
    read(req, res, (o) => {
      outcomes.push(o);
      res.end(JSON.stringify(o));
    }),
  );
  return { server, outcomes };
}

/** Sends raw bytes and resolves with what came back once the server closed or `ms` passed. */
function exchange(server: LocalServer, raw: string, opts: { end?: boolean; ms?: number } = {}): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(server.port, '127.0.0.1');
    let got = '';
    socket.on('data', (d) => (got += d.toString()));
    socket.on('error', () => {});
    const finish = () => {
      socket.destroy();
      resolve(got);
    };
    socket.on('close', finish);
    setTimeout(finish, opts.ms ?? 300);
    socket.write(raw);
    if (opts.end) socket.end();
  });
}

const head = (headers: string) =>
  `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${headers}\r\n`;

const CASES: Record<string, { raw: string; end?: boolean }> = {
  sized: { raw: `${head('Content-Length: 11\r\n')}{"model":1}` },
  'sized, empty': { raw: head('Content-Length: 0\r\n') },
  chunked: { raw: `${head('Transfer-Encoding: chunked\r\n')}5\r\n{"a":\r\n2\r\n1}\r\n0\r\n\r\n` },
  'no body at all': { raw: head('') },
  'declared length over the cap': { raw: `${head(`Content-Length: ${LIMIT + 1}\r\n`)}${'x'.repeat(LIMIT + 1)}` },
  'chunked past the cap': {
    raw: `${head('Transfer-Encoding: chunked\r\n')}40\r\n${'x'.repeat(64)}\r\n1\r\ny\r\n0\r\n\r\n`,
  },
  'gzip-encoded': { raw: `${head('Content-Length: 2\r\nContent-Encoding: gzip\r\n')}{}` },
  'identity named': { raw: `${head('Content-Length: 2\r\nContent-Encoding: IDENTITY\r\n')}{}` },
  'client gone mid-body': { raw: `${head('Content-Length: 40\r\n')}{"model":`, end: true },
};

describe('readRawBody', () => {
  let ours: Awaited<ReturnType<typeof recorder>>;
  let theirs: Awaited<ReturnType<typeof recorder>>;
  beforeAll(async () => {
    ours = await recorder((req, _res, done) =>
      readRawBody(req, LIMIT, (err, body) =>
        done(err ? describeError(err) : { body: body === undefined ? null : body.toString('latin1') }),
      ),
    );
    const raw = express.raw({ type: () => true, limit: LIMIT, inflate: false });
    theirs = await recorder((req, res, done) =>
      raw(req as express.Request, res as express.Response, (err?: unknown) => {
        const body = (req as express.Request).body as Buffer | undefined;
        done(err ? describeError(err as Error) : { body: body === undefined ? null : body.toString('latin1') });
      }),
    );
  });
  afterAll(async () => {
    await ours.server.close();
    await theirs.server.close();
  });

  it.each(Object.keys(CASES))('answers as express.raw({ inflate: false }) did: %s', async (name) => {
    const { raw, end } = CASES[name]!;
    const [a, b] = [ours, theirs].map((r) => r.outcomes.length);
    const [gotOurs, gotTheirs] = await Promise.all([
      exchange(ours.server, raw, { end }),
      exchange(theirs.server, raw, { end }),
    ]);
    expect(ours.outcomes.slice(a)).toEqual(theirs.outcomes.slice(b));
    expect(gotOurs.replace(/^Date: .*\r\n/m, '')).toBe(gotTheirs.replace(/^Date: .*\r\n/m, ''));
  });

  it('gives the chunks of a body as one Buffer, byte for byte', async () => {
    const body = Buffer.from([0x7b, 0xff, 0x00, 0x7d]);
    const got = await new Promise<Buffer | undefined>((resolve) => {
      void listenLocal((req, res) =>
        readRawBody(req, LIMIT, (_err, b) => {
          resolve(b);
          res.end();
        }),
      ).then(async (server) => {
        await fetch(server.url, { method: 'POST', body });
        await server.close();
      });
    });
    expect(got).toEqual(body);
  });
});

describe('readRawBody with a body budget', () => {
  it.each(Object.keys(CASES))(
    'holds what it read until released, and gives back all of a refused one: %s',
    async (name) => {
      const { raw, end } = CASES[name]!;
      const budget = createBodyBudget(1_000_000);
      let seen: { held: number; bytes: number; release?: () => void } | null = null;
      const server = await listenLocal((req, res) =>
        readRawBody(
          req,
          LIMIT,
          (err, body, release) => {
            seen = { held: budget.held, bytes: err ? 0 : (body?.length ?? 0), release };
            res.end();
          },
          budget,
        ),
      );
      try {
        await exchange(server, raw, { end });
        expect(seen).not.toBeNull();
        const { held, bytes, release } = seen!;
        // A read body's bytes, exactly, while its caller holds it; a refused or empty one holds nothing.
        expect(held).toBe(bytes);
        release?.();
        release?.(); // once only
        expect(budget.held).toBe(0);
      } finally {
        await server.close();
      }
    },
  );

  it('refuses a declared length that does not fit before reading it, and a chunked body as it passes the budget', async () => {
    const budget = createBodyBudget(50);
    const errors: string[] = [];
    const server = await listenLocal((req, res) =>
      readRawBody(
        req,
        LIMIT,
        (err) => {
          if (err) errors.push(`${toHaruError(err).code}: ${err.message}`);
          res.end();
        },
        budget,
      ),
    );
    try {
      await exchange(server, `${head('Content-Length: 60\r\n')}${'x'.repeat(60)}`);
      await exchange(
        server,
        `${head('Transfer-Encoding: chunked\r\n')}28\r\n${'x'.repeat(40)}\r\n14\r\n${'y'.repeat(20)}\r\n0\r\n\r\n`,
      );
      expect(errors).toEqual([
        'overloaded: this API process holds 0 bytes of request bodies; 60 more would pass its 50-byte budget',
        expect.stringMatching(/^overloaded: this API process holds 40 bytes of request bodies; 20 more would pass/),
      ]);
      expect(budget.held).toBe(0);
    } finally {
      await server.close();
    }
  });
});
