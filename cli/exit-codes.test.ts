/**
 * Exit statuses as an operator's script sees them, from the real `node bin/haru.js`: 2 for every kind of bad
 * input (nothing was attempted), 1 for a call that failed, 0 for help and the version.
 */
import { CommanderError, InvalidArgumentError } from 'commander';
import { ConfigError } from '../schemas/env';
import { runCli } from '../test/support/cli';
import { startFakeApi, type FakeApi } from '../test/support/fake-haru-api';
import { BadInputError, EXIT, exitCodeFor } from './exit-codes';

describe('exitCodeFor', () => {
  it('maps help and the version to 0, parse problems and bad configuration to 2, anything else to 1', () => {
    expect(exitCodeFor(new CommanderError(0, 'commander.helpDisplayed', ''))).toBe(EXIT.ok);
    expect(exitCodeFor(new CommanderError(1, 'commander.unknownOption', ''))).toBe(EXIT.badInput);
    expect(exitCodeFor(new InvalidArgumentError('bad'))).toBe(EXIT.badInput);
    expect(exitCodeFor(new ConfigError('bad'))).toBe(EXIT.badInput);
    expect(exitCodeFor(new BadInputError('bad'))).toBe(EXIT.badInput);
    expect(exitCodeFor(new Error('api_unreachable: …'))).toBe(EXIT.failed);
  });
});

describe('haru exit statuses', () => {
  let api: FakeApi;
  beforeAll(async () => {
    api = await startFakeApi({});
  });
  afterAll(() => api.close());
  const haru = (args: string[], env: NodeJS.ProcessEnv = {}) =>
    runCli(args, { HARU_URL: api.url, HARU_API_TOKEN: '', HARU_CONFIG: '/nonexistent/haru.json', ...env });

  const badInputs: [string, string[], RegExp, NodeJS.ProcessEnv?][] = [
    ['an unknown option', ['fleet', 'status', 'prod', '--bogus'], /unknown option '--bogus'/],
    ['a bad option value', ['fleet', 'events', 'prod', '--limit', '0'], /'--limit <n>' argument '0' is invalid/],
    ['an output format that does not exist', ['fleet', 'list', '-o', 'xml'], /Allowed choices are table, wide/],
    ['a missing argument', ['fleet', 'status'], /missing required argument 'fleet'/],
    ['an unknown command', ['fleet', 'statsu', 'prod'], /unknown command 'statsu'/],
    ['a bad --server', ['--server', 'haru.example', 'fleet', 'list'], /^haru: --server must be an http\(s\) URL$/m],
    ['a bad HARU_URL', ['fleet', 'list'], /HARU_URL must be an http\(s\) URL/, { HARU_URL: 'ftp://x' }],
    ['a shell with no completion script', ['completion', 'fish'], /^haru: shell must be bash or zsh, not fish$/m],
  ];
  it.each(badInputs)('exits 2 for %s, saying what is wrong', async (_what, args, message, env = {}) => {
    const run = await haru(args, env);
    expect([run.code, run.stderr]).toEqual([2, expect.stringMatching(message)]);
    expect(run.stderr).not.toMatch(/\n\s+at /);
  });

  it('exits 1 for a call the API refused, printing its code and message', async () => {
    const run = await haru(['fleet', 'status', 'nope']);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^haru: fleet_not_found: /);
  });

  it('exits 1 for an API it cannot reach, naming where the address came from', async () => {
    const run = await haru(['--server', 'http://127.0.0.1:9', 'fleet', 'list']);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      /^haru: api_unreachable: cannot reach the Haru API at http:\/\/127\.0\.0\.1:9 .*\(--server\)$/m,
    );
  });

  it('exits 2 before sending a token over plain http:// off loopback, and sends it with --insecure-http', async () => {
    // haru.invalid never resolves: the refusal comes before any connection, the opt-in gets as far as DNS.
    const refused = await haru(['--server', 'http://haru.invalid:8700', '--token', 't', 'fleet', 'list']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(
      /^haru: refusing to send the API token \(--token\) over plain http:\/\/ to haru\.invalid:8700/,
    );
    const allowed = await haru([
      '--server',
      'http://haru.invalid:8700',
      '--token',
      't',
      '--insecure-http',
      'fleet',
      'list',
    ]);
    expect(allowed.code).toBe(1);
    expect(allowed.stderr).toMatch(/api_unreachable/);
  });

  it('exits 0 for --version and --help', async () => {
    expect((await haru(['--version'])).code).toBe(0);
    const help = await haru(['fleet', 'status', '--help']);
    expect(help.code).toBe(0);
    // The global options show in every command's help.
    expect(help.stdout).toMatch(/--server <url>/);
  });
});
