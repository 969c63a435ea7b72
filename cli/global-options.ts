import type { Command } from 'commander';

/** The global options that take a value: the word after one is its value, never a command's name. */
const VALUE_OPTIONS = ['--server', '--token', '--context'];

/**
 * `--server`, `--token`, `--context` and `--insecure-http` on the program: accepted before or after the
 * subcommand, read by each API command through `optsWithGlobals()` (cli/connection.ts says which wins).
 */
export function addGlobalOptions(program: Command): void {
  program
    .option('--server <url>', 'the Haru API (over HARU_URL and the config file)')
    .option('--token <token>', 'the API token (over HARU_API_TOKEN and the config file)')
    .option('--context <name>', 'the config file context to use (default: its current one)')
    .option('--insecure-http', 'send the token over plain http:// to a host off loopback (a trusted network only)');
}

/** The command a command line names (`fleet` in `haru --server URL fleet status`), or undefined. */
export function commandNameOf(args: readonly string[]): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (VALUE_OPTIONS.includes(arg)) i++;
    else if (!arg.startsWith('-')) return arg;
  }
  return undefined;
}
