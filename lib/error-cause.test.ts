import { causeCode, describeCause, findCause, hasCause, MAX_CAUSE_DEPTH } from './error-cause';

/** `new Error(message)` with a code and a cause, the way Node, undici and postgres.js build them. */
function failure(message: string, fields: { code?: unknown; cause?: unknown } = {}): Error {
  return Object.assign(new Error(message, fields.cause === undefined ? undefined : { cause: fields.cause }), {
    ...(fields.code === undefined ? {} : { code: fields.code }),
  });
}

describe('findCause', () => {
  it('visits the error first, then each cause outward in', () => {
    const seen: unknown[] = [];
    const inner = failure('inner');
    const middle = failure('middle', { cause: inner });
    const outer = failure('outer', { cause: middle });
    findCause(outer, (link) => void seen.push(link));
    expect(seen).toEqual([outer, middle, inner]);
  });

  it('returns the first value the picker gives', () => {
    const err = failure('fetch failed', { cause: failure('connect ECONNREFUSED', { code: 'ECONNREFUSED' }) });
    expect(findCause(err, (link) => (link.code ? `${String(link.code)}!` : undefined))).toBe('ECONNREFUSED!');
  });

  it(`stops after ${MAX_CAUSE_DEPTH} links, so a cyclic chain ends`, () => {
    const a = failure('a') as Error & { cause?: unknown };
    const b = failure('b', { cause: a });
    a.cause = b;
    let visits = 0;
    expect(findCause(a, () => void (visits += 1))).toBeUndefined();
    expect(visits).toBe(MAX_CAUSE_DEPTH);
  });

  it('looks no further than the depth limit', () => {
    let err: unknown = failure('deepest', { code: 'ECONNRESET' });
    for (let i = 0; i < MAX_CAUSE_DEPTH; i += 1) err = failure(`wrap ${i}`, { cause: err });
    expect(causeCode(err)).toBeUndefined();
  });

  it('treats non-objects as an empty chain', () => {
    for (const value of [undefined, null, 'ECONNREFUSED', 42]) expect(findCause(value, () => true)).toBeUndefined();
  });
});

describe('causeCode', () => {
  it('finds a code in a cause (drizzle and fetch wrap the driver error)', () => {
    const err = failure('Failed query', { cause: failure('lock not available', { code: '55P03' }) });
    expect(causeCode(err)).toBe('55P03');
  });

  it('prefers the outermost accepted code and skips the ones `accept` refuses', () => {
    const err = failure('outer', { code: 'ERR_X', cause: failure('inner', { code: '57P01' }) });
    expect(causeCode(err)).toBe('ERR_X');
    expect(causeCode(err, (code) => /^[0-9A-Z]{5}$/.test(code))).toBe('57P01');
  });

  it('ignores non-string codes (gRPC puts numbers there)', () => {
    expect(causeCode(failure('unavailable', { code: 14 }))).toBeUndefined();
  });
});

describe('hasCause', () => {
  it('is true when any link passes and false otherwise', () => {
    const err = failure('outer', { cause: failure('14 UNAVAILABLE', { code: 14 }) });
    expect(hasCause(err, (link) => link.code === 14)).toBe(true);
    expect(hasCause(err, (link) => link.code === 4)).toBe(false);
  });
});

describe('describeCause', () => {
  it('names the socket code that fetch hides in its cause', () => {
    const err = failure('fetch failed', {
      cause: failure('connect ECONNREFUSED 127.0.0.1:1', { code: 'ECONNREFUSED' }),
    });
    expect(describeCause(err)).toBe('ECONNREFUSED');
  });

  it('falls back to the innermost message, then to the value itself', () => {
    expect(describeCause(failure('fetch failed', { cause: failure('other side closed') }))).toBe('other side closed');
    expect(describeCause(failure('plain'))).toBe('plain');
    expect(describeCause('a string')).toBe('a string');
  });
});
