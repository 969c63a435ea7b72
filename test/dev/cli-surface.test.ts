/**
 * The `haru` command's surface: every command answers `--help` with a description, every read command
 * offers `--json`, and a configuration error reaches the user as one line with exit status 2, never a
 * stack trace.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Command } from 'commander';
import { buildProgram } from '../../cli/main';
import { HARU, ROOT } from './support';

const run = promisify(execFile);
const packageVersion = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string })
  .version;
const haru = (args: string[], env: NodeJS.ProcessEnv = {}) =>
  run(process.execPath, [HARU, ...args], { cwd: ROOT, env: { ...process.env, ...env }, timeout: 60_000 }).then(
    (r) => ({ code: 0, ...r }),
    (err: { code: number; stdout: string; stderr: string }) => ({
      code: err.code,
      stdout: err.stdout,
      stderr: err.stderr,
    }),
  );

/** Every command of the program with its full name (`fleet status`). */
function allCommands(cmd: Command, prefix: string[] = []): { name: string; cmd: Command }[] {
  return cmd.commands
    .filter((c) => c.name() !== 'help')
    .flatMap((c) => {
      const path = [...prefix, c.name()];
      return [{ name: path.join(' '), cmd: c }, ...allCommands(c, path)];
    });
}

describe('the haru command', () => {
  const commands = allCommands(buildProgram());

  it('has the commands of issue 6', () => {
    const names = commands.map((c) => c.name);
    for (const expected of [
      'dev',
      'api',
      'worker',
      'supervisor',
      'db migrate',
      'db seed',
      'fleet list',
      'fleet status',
      'fleet promote',
      'fleet demote',
      'fleet abort',
      'fleet watch',
      'fleet events',
      'sim domain',
      'sim kill',
    ])
      expect(names).toContain(expected);
  });

  it('describes every command in its --help', () => {
    for (const { name, cmd } of commands) {
      expect([name, cmd.description().length > 10]).toEqual([name, true]);
      let help = '';
      cmd.configureOutput({ writeOut: (s) => (help += s) });
      cmd.outputHelp();
      expect(help).toMatch(/^Usage: /);
      expect(help).toContain(cmd.description().slice(0, 30));
    }
  });

  it('offers --json on every command that reads', () => {
    const reads = ['fleet list', 'fleet status', 'fleet events', 'fleet watch', 'db seed'];
    for (const name of reads) {
      const cmd = commands.find((c) => c.name === name)!.cmd;
      expect([name, cmd.options.map((o) => o.long)]).toEqual([name, expect.arrayContaining(['--json'])]);
    }
  });

  it('offers the same -o table|wide|json|yaml on every command that offers --json', () => {
    for (const { name, cmd } of commands.filter((c) => c.cmd.options.some((o) => o.long === '--json'))) {
      const output = cmd.options.find((o) => o.long === '--output');
      expect([name, output?.short, output?.argChoices]).toEqual([name, '-o', ['table', 'wide', 'json', 'yaml']]);
    }
  });

  it('prints its version with --version, and a bad option value as one line', async () => {
    const version = await haru(['--version']);
    expect([version.code, version.stdout.trim()]).toEqual([0, packageVersion]);
    const bad = await haru(['fleet', 'events', 'dev', '--limit', '0']);
    expect(bad.code).toBe(2);
    expect(bad.stderr.split('\n')[0]).toBe(
      "error: option '--limit <n>' argument '0' is invalid. must be an integer from 1 to 1000",
    );
    expect(bad.stderr).not.toContain('too_small');
  });

  it('prints help from the real binary, for the program and for a subcommand', async () => {
    const top = await haru(['--help']);
    expect(top.code).toBe(0);
    for (const name of ['dev', 'api', 'worker', 'supervisor', 'db', 'fleet', 'sim']) expect(top.stdout).toContain(name);
    const dev = await haru(['dev', '--help']);
    expect(dev.code).toBe(0);
    expect(dev.stdout).toContain('HARU_SIM_PORT_OFFSET');
    const watch = await haru(['fleet', 'watch', '--help']);
    expect(watch.stdout).toContain('--next');
  });

  it('reports bad configuration as one line per problem, exit 2, without a stack trace', async () => {
    const bad = await haru(['dev'], { PORT: 'eighty', HARU_STATE_DIR: '/nonexistent/never-created' });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^haru: invalid dev stack environment:\n {2}PORT: /);
    expect(bad.stderr).not.toMatch(/\n\s+at /);
  });

  it('reports an unreachable API with its code and the variable to check, exit 1', async () => {
    const down = await haru(['fleet', 'list'], { HARU_URL: 'http://127.0.0.1:9' });
    expect(down.code).toBe(1);
    expect(down.stderr.trim()).toMatch(
      /^haru: api_unreachable: cannot reach the Haru API at http:\/\/127\.0\.0\.1:9 .*HARU_URL/,
    );
    expect(down.stderr).not.toMatch(/\n\s+at /);
  });
});
