import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { bearerAuth, bearerCheck, bearerIdentify, type BearerRefusal, tokenDigest } from './bearer-auth';

describe('bearerCheck', () => {
  const check = bearerCheck('s3cret');

  it('accepts the token with any case of the scheme and any number of spaces', () => {
    expect(check('Bearer s3cret')).toBeNull();
    expect(check('bearer   s3cret')).toBeNull();
    expect(check('BEARER s3cret ')).toBeNull();
  });

  it('calls absent, empty or non-Bearer credentials missing', () => {
    for (const header of [undefined, '', 'Bearer', 'Bearer    ', 'Basic czNjcmV0', 's3cret']) {
      expect(check(header)).toBe('missing bearer token');
    }
  });

  it('calls a wrong token, a prefix of it or a longer one invalid', () => {
    for (const token of ['wrong', 's3cre', 's3crets', 'S3CRET'])
      expect(check(`Bearer ${token}`)).toBe('invalid bearer token');
  });
});

describe('bearerIdentify', () => {
  const identify = bearerIdentify([
    { digest: tokenDigest('alpha-token'), value: 'alpha' },
    { digest: tokenDigest('beta-token'), value: 'beta' },
  ]);

  it('names the candidate whose token was presented, whichever its place', () => {
    expect(identify('Bearer alpha-token')).toEqual({ value: 'alpha' });
    expect(identify('bearer  beta-token ')).toEqual({ value: 'beta' });
  });

  it('refuses a missing or unknown token, and accepts nothing without candidates', () => {
    expect(identify(undefined)).toEqual({ refusal: 'missing bearer token' });
    expect(identify('Bearer alpha-tokenx')).toEqual({ refusal: 'invalid bearer token' });
    expect(bearerIdentify([])('Bearer alpha-token')).toEqual({ refusal: 'invalid bearer token' });
  });
});

describe('bearerAuth', () => {
  let server: Server;
  let url: string;
  let middleware = bearerAuth('s3cret', (reason) => new Error(reason));

  beforeAll(async () => {
    server = createServer((req, res) => {
      middleware(req, res, (err) => {
        res.statusCode = err ? 401 : 200;
        res.end(err ? (err as Error).message : 'ok');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));

  it('passes a request with the token on, without a challenge header', async () => {
    const res = await fetch(url, { headers: { authorization: 'Bearer s3cret' } });
    expect([res.status, await res.text(), res.headers.get('www-authenticate')]).toEqual([200, 'ok', null]);
  });

  it("refuses with the caller's error and a Bearer challenge", async () => {
    const reasons: BearerRefusal[] = [];
    middleware = bearerAuth('s3cret', (reason) => {
      reasons.push(reason);
      return new Error(`refused: ${reason}`);
    });
    const none = await fetch(url);
    const wrong = await fetch(url, { headers: { authorization: 'Bearer nope' } });
    expect([none.status, await none.text(), none.headers.get('www-authenticate')]).toEqual([
      401,
      'refused: missing bearer token',
      'Bearer',
    ]);
    expect([wrong.status, wrong.headers.get('www-authenticate')]).toEqual([401, 'Bearer']);
    expect(reasons).toEqual(['missing bearer token', 'invalid bearer token']);
  });

  it('lets everything through when no token is configured', async () => {
    middleware = bearerAuth(undefined, () => new Error('never'));
    const res = await fetch(url);
    expect(res.status).toBe(200);
  });
});
