/**
 * `haru config` and the contexts it writes, through the real `node bin/haru.js`: the file it writes, which
 * context an API command then uses, and which of flag, variable and context wins.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { runCli } from '../../test/support/cli';

const ROOT = path.resolve(__dirname, '..', '..');
import { startFakeApi, type FakeApi } from '../../test/support/fake-haru-api';

let dir: string;
let prod: FakeApi;
let staging: FakeApi;
const fleets = { '/v1/fleets': { body: { fleets: [] } } };

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'haru-contexts-'));
  writeFileSync(path.join(dir, 'prod.token'), 'prod-token\n', { mode: 0o600 });
  [prod, staging] = await Promise.all([startFakeApi(fleets), startFakeApi(fleets)]);
});
afterAll(async () => {
  await Promise.all([prod.close(), staging.close()]);
  rmSync(dir, { recursive: true, force: true });
});

const CONFIG = () => path.join(dir, 'haru', 'config.json');
/** `haru` with only the config file for settings: no HARU_URL or HARU_API_TOKEN from this process. */
const haru = (args: string[], env: NodeJS.ProcessEnv = {}) =>
  runCli(args, { HARU_URL: '', HARU_API_TOKEN: '', HARU_CONFIG: CONFIG(), ...env });

describe('haru config', () => {
  it('writes contexts to a file of mode 600, the first one current, and lists them without tokens', async () => {
    // A relative --token-file is relative to where the command runs (runCli: the repository root).
    const tokenArg = path.relative(ROOT, path.join(dir, 'prod.token'));
    const set = await haru(['config', 'set-context', 'prod', '--server', prod.url, '--token-file', tokenArg]);
    expect([set.code, set.stdout.trim()]).toEqual([0, `context prod created in ${CONFIG()}`]);
    expect((await haru(['config', 'set-context', 'staging', '--server', staging.url])).code).toBe(0);
    expect(statSync(CONFIG()).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(CONFIG(), 'utf8'))).toEqual({
      currentContext: 'prod',
      contexts: {
        prod: { server: prod.url, tokenFile: path.join(dir, 'prod.token') },
        staging: { server: staging.url },
      },
    });
    const list = await haru(['config', 'get-contexts']);
    expect(list.stdout.split('\n').slice(0, 3)).toEqual([
      expect.stringMatching(/^CURRENT +NAME +SERVER +TOKEN$/),
      expect.stringMatching(new RegExp(`^\\* +prod +${prod.url} +file ${path.join(dir, 'prod.token')}$`)),
      expect.stringMatching(new RegExp(`^ +staging +${staging.url} +-$`)),
    ]);
  });

  it("sends the current context's token to its server, and --context picks another", async () => {
    expect((await haru(['fleet', 'list'])).code).toBe(0);
    expect(prod.seen.at(-1)).toEqual({ path: '/v1/fleets', authorization: 'Bearer prod-token' });
    expect((await haru(['--context', 'staging', 'fleet', 'list'])).code).toBe(0);
    expect(staging.seen.at(-1)).toEqual({ path: '/v1/fleets', authorization: undefined });
  });

  it('switches the current context, and refuses one that does not exist with exit 2', async () => {
    const use = await haru(['config', 'use-context', 'staging']);
    expect([use.code, use.stdout.trim()]).toEqual([0, 'switched to context staging']);
    expect((await haru(['config', 'current-context'])).stdout.trim()).toBe('staging');
    const missing = await haru(['config', 'use-context', 'nope']);
    expect([missing.code, missing.stderr.trim()]).toEqual([2, `haru: no context nope in ${CONFIG()}`]);
  });

  it('takes --server over HARU_URL over the context, and --token over HARU_API_TOKEN', async () => {
    const before = { prod: prod.seen.length, staging: staging.seen.length };
    // Current context: staging. HARU_URL names prod; --server names staging again.
    expect((await haru(['fleet', 'list'], { HARU_URL: prod.url, HARU_API_TOKEN: 'env' })).code).toBe(0);
    expect(prod.seen.at(-1)?.authorization).toBe('Bearer env');
    expect(
      (
        await haru(['--server', staging.url, '--token', 'flag', 'fleet', 'list'], {
          HARU_URL: prod.url,
          HARU_API_TOKEN: 'env',
        })
      ).code,
    ).toBe(0);
    expect(staging.seen.at(-1)?.authorization).toBe('Bearer flag');
    expect([prod.seen.length - before.prod, staging.seen.length - before.staging]).toEqual([1, 1]);
  });

  it('refuses a context with a server that is no http(s) URL, exit 2, leaving the file as it was', async () => {
    const before = readFileSync(CONFIG(), 'utf8');
    const run = await haru(['config', 'set-context', 'lab', '--server', 'lab.internal:8700']);
    expect([run.code, run.stderr]).toEqual([2, 'haru: --server must be an http(s) URL\n']);
    expect(readFileSync(CONFIG(), 'utf8')).toBe(before);
  });

  it('stores --insecure-http on the context, which then sends its token over http:// off loopback', async () => {
    const set = await haru(['config', 'set-context', 'lab', '--server', 'http://haru.invalid:8700', '--insecure-http']);
    expect(set.code).toBe(0);
    expect(JSON.parse(readFileSync(CONFIG(), 'utf8')).contexts.lab).toEqual({
      server: 'http://haru.invalid:8700',
      insecureHttp: true,
    });
    // With a token and without the opt-in, the same server is refused before any connection.
    const refused = await haru([
      '--context',
      'staging',
      '--server',
      'http://haru.invalid:8700',
      '--token',
      't',
      'fleet',
      'list',
    ]);
    expect(refused.code).toBe(2);
    const allowed = await haru(['--context', 'lab', '--token', 't', 'fleet', 'list']);
    expect([allowed.code, allowed.stderr]).toEqual([
      1,
      expect.stringMatching(/^haru: api_unreachable: .*haru\.invalid/),
    ]);
  });

  it('never prints a token: get-contexts -o yaml says only how a context gets it', async () => {
    const file = path.join(dir, 'inline.json');
    const config = { currentContext: 'ci', contexts: { ci: { server: 'https://ci.example', token: 'sekrit' } } };
    writeFileSync(file, JSON.stringify(config), { mode: 0o600 });
    const run = await haru(['config', 'get-contexts', '-o', 'yaml'], { HARU_CONFIG: file });
    expect(run.code).toBe(0);
    expect(YAML.parse(run.stdout)).toEqual([
      { name: 'ci', isCurrent: true, server: 'https://ci.example', token: 'inline', insecureHttp: false },
    ]);
    expect(run.stdout).not.toContain('sekrit');
  });

  it('refuses a config file with a problem, naming the file and the JSON path, exit 2', async () => {
    const bad = path.join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify({ contexts: { prod: { server: 'nope' } } }));
    const run = await haru(['fleet', 'list'], { HARU_CONFIG: bad });
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(`haru: invalid config file ${bad}:\n  contexts.prod.server: must be an http(s) URL\n`);
  });
});
