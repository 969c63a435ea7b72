import { HaruError } from '../../schemas/errors';

/** What the proxy reads from a request body; the body itself is forwarded untouched. */
export interface InferenceBody {
  model: string;
  /** `stream: true` in the body: the answer is SSE, so a held request gets comment pings. */
  stream: boolean;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const SCALAR_RE = /^(?:true|false|null|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?)$/;

const notJson = () => new HaruError('invalid_request', 'request body is not valid JSON');
const isSpace = (b: number | undefined) => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;

/** The index just past the string literal whose opening quote is at `start`; throws when it never closes. */
function stringEnd(buf: Buffer, start: number): number {
  let from = start + 1;
  for (;;) {
    const q = buf.indexOf(QUOTE, from);
    if (q < 0) throw notJson();
    let slashes = 0;
    while (buf[q - 1 - slashes] === BACKSLASH) slashes++;
    if (slashes % 2 === 0) return q + 1;
    from = q + 1;
  }
}

/**
 * A scan of one JSON body that never builds its values: strings are skipped with `Buffer.indexOf` (native,
 * so a 30 MiB prompt or base64 image costs milliseconds, not a parse of the whole document), containers by
 * matching brackets. The top-level object is checked to the letter (keys, colons, commas, scalars, nothing
 * after it); nested values only for balanced brackets and closed strings, the upstream validates the rest.
 */
class BodyScan {
  i = 0;
  constructor(private readonly buf: Buffer) {}

  skipSpace(): number | undefined {
    while (isSpace(this.buf[this.i])) this.i++;
    return this.buf[this.i];
  }

  expect(b: number): void {
    if (this.skipSpace() !== b) throw notJson();
    this.i++;
  }

  /** At an opening quote: moves past the closing one; returns [start, end) of the whole literal. */
  string(): [number, number] {
    const start = this.i;
    this.i = stringEnd(this.buf, start);
    return [start, this.i];
  }

  /** Skips one value; returns [start, end) of it. Scalars at the top level must be well formed. */
  value(): [number, number] {
    const b = this.skipSpace();
    const start = this.i;
    if (b === QUOTE) return this.string();
    if (b === OPEN_OBJECT || b === OPEN_ARRAY) return [start, this.container()];
    while (this.i < this.buf.length) {
      const c = this.buf[this.i]!;
      if (c === COMMA || c === CLOSE_OBJECT || c === CLOSE_ARRAY || isSpace(c)) break;
      this.i++;
    }
    if (!SCALAR_RE.test(this.buf.toString('latin1', start, this.i))) throw notJson();
    return [start, this.i];
  }

  /** At `{` or `[`: moves past its matching bracket, skipping strings whole (locals: this is the hot loop). */
  private container(): number {
    const buf = this.buf;
    const closers: number[] = [];
    for (let i = this.i; i < buf.length; i++) {
      const c = buf[i]!;
      if (c === QUOTE) i = stringEnd(buf, i) - 1;
      else if (c === OPEN_OBJECT) closers.push(CLOSE_OBJECT);
      else if (c === OPEN_ARRAY) closers.push(CLOSE_ARRAY);
      else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
        if (closers.pop() !== c) throw notJson();
        if (closers.length === 0) return (this.i = i + 1);
      }
    }
    throw notJson();
  }

  text(start: number, end: number): string {
    return this.buf.toString('utf8', start, end);
  }

  /** A string literal's value: the raw bytes unless it has escapes (then JSON decodes it). */
  decode(start: number, end: number): string {
    const raw = this.buf.toString('utf8', start + 1, end - 1);
    if (!raw.includes('\\')) return raw;
    try {
      return JSON.parse(this.text(start, end)) as string;
    } catch {
      throw notJson();
    }
  }

  get atEnd(): boolean {
    return this.i >= this.buf.length;
  }
}

/**
 * Reads `model` (matched exactly, never rewritten) and `stream` from the raw body without materialising it
 * (see BodyScan); a repeated key counts as its last value, as JSON.parse would have it. Throws 400
 * `invalid_request` for an empty body, bad JSON, a non-object, or a missing/non-string model.
 */
export function readInferenceBody(raw: unknown): InferenceBody {
  if (!Buffer.isBuffer(raw) || raw.length === 0) {
    throw new HaruError('invalid_request', 'request body must be a JSON object with a "model"');
  }
  const scan = new BodyScan(raw);
  const first = scan.skipSpace();
  if (first !== OPEN_OBJECT) {
    if (first === undefined) throw notJson();
    scan.value();
    if (scan.skipSpace() !== undefined) throw notJson();
    throw new HaruError('invalid_request', 'request body must be a JSON object');
  }
  scan.i++;
  let model: unknown;
  let stream = false;
  if (scan.skipSpace() === CLOSE_OBJECT) scan.i++;
  else {
    for (;;) {
      if (scan.skipSpace() !== QUOTE) throw notJson();
      const name = scan.decode(...scan.string());
      scan.expect(COLON);
      const [start, end] = scan.value();
      if (name === 'model') model = raw[start] === QUOTE ? scan.decode(start, end) : null;
      else if (name === 'stream') stream = end - start === 4 && scan.text(start, end) === 'true';
      const next = scan.skipSpace();
      scan.i++;
      if (next === CLOSE_OBJECT) break;
      if (next !== COMMA) throw notJson();
    }
  }
  scan.skipSpace();
  if (!scan.atEnd) throw notJson();
  if (typeof model !== 'string' || model.length === 0) {
    throw new HaruError('invalid_request', 'request body needs a "model" string');
  }
  return { model, stream };
}
