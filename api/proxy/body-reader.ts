import type { IncomingMessage } from 'node:http';
import type { ServerResponse } from 'node:http';
import { type BodyBudget, bodyBudgetExceeded, holdUntilClosed } from './body-budget';

/** What a refused body's error says besides its message, as raw-body names it. */
interface BodyErrorFields {
  limit?: number;
  length?: number | null;
  expected?: number | null;
  received?: number;
  encoding?: string;
  code?: string;
}

/** A refused body, shaped like body-parser's errors (`status`, `type`, the sizes), so toHaruError maps it alike. */
export class BodyReadError extends Error {
  readonly statusCode: number;
  readonly expose: boolean;
  constructor(
    readonly status: number,
    message: string,
    readonly type: string,
    fields: BodyErrorFields = {},
  ) {
    super(message);
    this.statusCode = status;
    this.expose = status < 500;
    Object.assign(this, fields);
  }
}

/** on-finished's test for a request: nothing more will be read from it. */
const isFinished = (req: IncomingMessage & { upgrade?: boolean }) =>
  Boolean(req.upgrade || !req.socket || !req.socket.readable || (req.complete && !req.readable));

/** type-is's test: a request has a body when it names a transfer encoding or a numeric length. */
const hasBody = (req: IncomingMessage) =>
  req.headers['transfer-encoding'] !== undefined || !Number.isNaN(Number(req.headers['content-length']));

/** Reads the rest of a refused request off the connection, then answers (the error goes out after the body). */
function dumpThen(req: IncomingMessage, answer: () => void): void {
  if (isFinished(req)) return answer();
  let called = false;
  const once = () => {
    if (called) return;
    called = true;
    req.off('end', once);
    req.off('close', once);
    answer();
  };
  req.on('end', once);
  req.on('close', once);
  req.resume();
}

/**
 * The proxy's body reader on Node's own request: the raw Buffer, byte for byte, capped at `limit` for sized
 * and chunked bodies, no inflate. It answers as `express.raw({ type: () => true, limit, inflate: false })`
 * (body-parser 2 and raw-body 3) did, without their per-request cost (content-type parsing, an async
 * resource, http-errors, five stream listeners and a nextTick): `undefined` for a request without a body
 * (no length, no transfer encoding) or one already read; a 415 `encoding.unsupported` for a
 * `Content-Encoding` other than identity; a 413 `entity.too.large` for a declared length over the cap
 * (before reading) or a body that grows past it; 400 `request.size.invalid` for a body shorter or longer
 * than its declared length, 400 `request.aborted` for a client that went away. A refused body is read off
 * the connection before `done` gets the error, as body-parser did.
 */
export function readRawBody(
  req: IncomingMessage,
  limit: number,
  done: (err: Error | null, body?: Buffer, release?: () => void) => void,
  budget?: BodyBudget,
): void {
  if (isFinished(req) || !hasBody(req)) return done(null, undefined);
  const encoding = (req.headers['content-encoding'] || 'identity').toLowerCase();
  if (encoding !== 'identity') {
    return done(new BodyReadError(415, 'content encoding unsupported', 'encoding.unsupported', { encoding }));
  }
  const declared = req.headers['content-length'];
  const length = declared !== undefined && !Number.isNaN(Number(declared)) ? parseInt(declared, 10) : null;
  const refuse = (err: Error & { status?: number; statusCode?: number; expose?: boolean }) => {
    // A stream's own error (a reset mid-body) becomes a 400, as body-parser's createError(400, err) made it.
    if (typeof err.status !== 'number') Object.assign(err, { status: 400, statusCode: 400, expose: true });
    req.pause();
    dumpThen(req, () => done(err));
  };
  if (length !== null && length > limit) {
    const err = new BodyReadError(413, 'request entity too large', 'entity.too.large', {
      expected: length,
      length,
      limit,
    });
    return process.nextTick(refuse, err);
  }
  if (!req.readable) {
    return process.nextTick(refuse, new BodyReadError(500, 'stream is not readable', 'stream.not.readable'));
  }
  // With a budget, the bytes are taken as they come, chunk by chunk (a declared length that does not fit what
  // is left is refused before any is read, but not reserved: a client that declares much and sends nothing
  // holds nothing), and handed to `done` with the body; a refused or failed body gives back what it took.
  const taken = new BudgetTake(budget);
  if (length !== null && budget && budget.held + length > budget.limit)
    return process.nextTick(refuse, bodyBudgetExceeded(budget, length));
  // Until the body is read or refused, its bytes are this reader's: a request that closes first gives them back.
  let settled = false;
  req.once('close', () => {
    if (!settled) taken.release();
  });
  const read = (err: Error | null, body?: Buffer) => {
    settled = true;
    if (err) {
      taken.release();
      return done(err);
    }
    done(null, body, taken.handOver());
  };
  const refused = (err: Error) => {
    settled = true;
    taken.release();
    refuse(err);
  };
  new BodyRead(req, limit, length, read, refused, (bytes) =>
    taken.take(bytes) ? null : bodyBudgetExceeded(budget!, bytes),
  ).start();
}

/**
 * The proxy's read of a request body (the lean path and the Express routes alike): `readRawBody` against the
 * process's body budget, the body's bytes kept taken until `res` closes (the body may be sent again until then).
 */
export function readProxyBody(
  req: IncomingMessage,
  res: ServerResponse,
  limit: number,
  budget: BodyBudget,
  done: (err: Error | null, body?: Buffer) => void,
): void {
  readRawBody(
    req,
    limit,
    (err, body, release) => {
      if (err) return done(err);
      holdUntilClosed(res, release);
      done(null, body);
    },
    budget,
  );
}

/** The bytes one body took from the budget: given back once, by a refusal or by the caller after its response. */
class BudgetTake {
  private readonly releases: (() => void)[] = [];
  constructor(private readonly budget: BodyBudget | undefined) {}
  /** False when `bytes` do not fit the budget now; true (taking nothing) without a budget. */
  take(bytes: number): boolean {
    if (!this.budget) return true;
    const release = this.budget.take(bytes);
    if (!release) return false;
    this.releases.push(release);
    return true;
  }
  release(): void {
    for (const r of this.releases.splice(0)) r();
  }
  /** The release the caller calls once it holds the body no longer; undefined without a budget. */
  handOver(): (() => void) | undefined {
    return this.budget ? () => this.release() : undefined;
  }
}

/** One body being read: the listeners of one request, removed when it ends either way. */
class BodyRead {
  private readonly chunks: Buffer[] = [];
  private received = 0;
  private complete = false;
  private readonly onData = (chunk: Buffer) => {
    if (this.complete) return;
    this.received += chunk.length;
    const overBudget = this.received <= this.limit ? this.admit(chunk.length) : null;
    if (overBudget) this.fail(overBudget);
    else if (this.received > this.limit) {
      this.fail(
        new BodyReadError(413, 'request entity too large', 'entity.too.large', {
          limit: this.limit,
          received: this.received,
        }),
      );
    } else this.chunks.push(chunk);
  };
  private readonly onEnd = (err?: Error) => {
    if (this.complete) return;
    if (err) return this.fail(err);
    if (this.length !== null && this.received !== this.length) {
      return this.fail(
        new BodyReadError(400, 'request size did not match content length', 'request.size.invalid', {
          expected: this.length,
          length: this.length,
          received: this.received,
        }),
      );
    }
    this.finish();
    this.done(null, this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks));
  };
  private readonly onAborted = () => {
    if (this.complete) return;
    this.fail(
      new BodyReadError(400, 'request aborted', 'request.aborted', {
        code: 'ECONNABORTED',
        expected: this.length,
        length: this.length,
        received: this.received,
      }),
    );
  };
  private readonly onClose = () => this.finish();

  constructor(
    private readonly req: IncomingMessage,
    private readonly limit: number,
    private readonly length: number | null,
    private readonly done: (err: Error | null, body?: Buffer) => void,
    private readonly refuse: (err: Error) => void,
    /** Takes a chunk's bytes from the budget; the refusal when they do not fit. */
    private readonly admit: (bytes: number) => Error | null,
  ) {}

  start(): void {
    this.req.on('aborted', this.onAborted);
    this.req.on('close', this.onClose);
    this.req.on('data', this.onData);
    this.req.on('end', this.onEnd);
    this.req.on('error', this.onEnd);
  }

  private finish(): void {
    this.complete = true;
    this.req.off('aborted', this.onAborted);
    this.req.off('close', this.onClose);
    this.req.off('data', this.onData);
    this.req.off('end', this.onEnd);
    this.req.off('error', this.onEnd);
  }

  private fail(err: Error): void {
    this.finish();
    this.refuse(err);
  }
}
