/**
 * The `haru` command. Each subcommand lives in cli/commands/<name>.ts and exports `register(program)`.
 * Errors reach the user as one line (`haru: <message>`), never a stack trace; cli/exit-codes.ts decides the
 * exit status (2 for bad input, 1 for a failed call).
 */
import { Command } from 'commander';
import { addOutputOption } from './arguments';
import { EXIT, exitCodeFor, isAlreadyReported } from './exit-codes';
import { addGlobalOptions, commandNameOf } from './global-options';

/** A subcommand: its line in `haru --help`, and its module, loaded only when that command runs. */
interface CommandEntry {
  name: string;
  summary: string;
  load: () => { register: (program: Command) => void };
}

// Register subcommands here. `require` (not a static import) so a start loads only the command it runs: the
// modules pull in zod, Express, Temporal and the database (docs/architecture.md §8.6).
/* eslint-disable @typescript-eslint/no-require-imports */
const commands: CommandEntry[] = [
  { name: 'fleet', summary: 'inspect and steer fleets through the Haru API', load: () => require('./commands/fleet') },
  { name: 'api', summary: 'run the Haru API and proxy', load: () => require('./commands/api') },
  { name: 'db', summary: 'migrate and seed the state store', load: () => require('./commands/db') },
  {
    name: 'layout',
    summary: "convert the original project's fleet layouts and supervisor configs",
    load: () => require('./commands/layout'),
  },
  { name: 'worker', summary: 'run a Haru worker', load: () => require('./commands/worker') },
  { name: 'supervisor', summary: 'run the GPU-host supervisor', load: () => require('./commands/supervisor') },
  { name: 'sim', summary: 'simulated GPU hosts for machines without GPUs', load: () => require('./commands/sim') },
  {
    name: 'domain',
    summary: 'provision and tear down domains through the Haru API',
    load: () => require('./commands/domain'),
  },
  {
    name: 'training',
    summary: "submit, list and cancel a fleet's training jobs through the Haru API",
    load: () => require('./commands/training'),
  },
  { name: 'dev', summary: 'run the whole stack on this machine', load: () => require('./commands/dev') },
  {
    name: 'config',
    summary: 'contexts: which API and token the commands use',
    load: () => require('./commands/config'),
  },
  {
    name: 'gateway',
    summary: 'keep a gateway (nginx) in front of the models on the route intent',
    load: () => require('./commands/gateway'),
  },
  { name: 'completion', summary: 'print a shell completion script', load: () => require('./commands/completion') },
];
/* eslint-enable @typescript-eslint/no-require-imports */

/** The version in package.json (read on use: the compiled CLI is one file under dist/). */
function version(): string {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (require('../package.json') as { version: string }).version;
}

function baseProgram(): Command {
  const program = new Command('haru')
    .description('Hot failover for self-hosted vLLM fleets at the cost of zero idle GPUs')
    .version(version(), '-V, --version', 'print the version of haru')
    .showHelpAfterError()
    .configureHelp({ showGlobalOptions: true })
    .exitOverride();
  addGlobalOptions(program);
  return program;
}

/** The whole command tree, every subcommand registered (help tests, shell completion). */
export function buildProgram(): Command {
  const program = baseProgram();
  for (const entry of commands) {
    entry.load().register(program);
    program.commands.at(-1)?.summary(entry.summary);
  }
  addOutputOption(program);
  return program;
}

/**
 * The tree for one run: the subcommand named in `argv` registered in full, every other one as a line of
 * `--help` only, so `haru --version` and `haru fleet status` load nothing they do not use.
 */
function programFor(argv: string[]): Command {
  const named = commandNameOf(argv.slice(2));
  if (named === 'help' || named === 'completion') return buildProgram();
  const program = baseProgram();
  for (const entry of commands) {
    if (entry.name === named) entry.load().register(program);
    else program.command(entry.name);
    program.commands.at(-1)?.summary(entry.summary);
  }
  addOutputOption(program);
  return program;
}

/**
 * A reader that went away (`haru db seed | head`, a `tee` ended by the same Ctrl-C as `haru dev`) makes every
 * later write fail with EPIPE: drop those writes instead of crashing, so shutdown still stops what it started.
 */
function ignoreClosedOutput(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE' && err.code !== 'ERR_STREAM_DESTROYED') throw err;
    });
  }
}

/**
 * Runs the command line `argv` (`process.argv`: node, script, arguments...). `bin/haru.js` calls it, whatever
 * name the command was started by (`npm link`'s and `npx`'s bin link is `haru`, not `haru.js`).
 */
export async function main(argv: string[]): Promise<void> {
  ignoreClosedOutput();
  const program = programFor(argv);
  try {
    await program.parseAsync(argv);
  } catch (err) {
    const code = exitCodeFor(err);
    const message = err instanceof Error ? err.message : String(err);
    // Bad input prints as written (a configuration error lists its problems indented below its first line);
    // anything else one line per problem (an API validation error lists one field a line).
    if (isAlreadyReported(err)) process.exit(code);
    if (code === EXIT.badInput) process.stderr.write(`haru: ${message}\n`);
    else for (const line of message.split('\n').filter((l) => l.trim())) process.stderr.write(`haru: ${line.trim()}\n`);
    process.exit(code);
  }
}

// Started as the program itself (`node dist/haru.js`, `tsx cli/main.ts`); bin/haru.js and tests only load it.
if (require.main === module) void main(process.argv);
