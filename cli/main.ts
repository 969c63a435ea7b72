/**
 * The `haru` command. Each subcommand lives in cli/commands/<name>.ts and exports `register(program)`.
 * Errors reach the user as one line (`haru: <message>`), never a stack trace; exit 2 for bad input.
 */
import { Command, CommanderError } from 'commander';
import { ConfigError } from '../schemas/env';

// Register subcommands here: `import { register as registerX } from './commands/x';` and add it to the list.
import { register as registerFleet } from './commands/fleet';
import { register as registerApi } from './commands/api';
import { register as registerDb } from './commands/db';
import { register as registerWorker } from './commands/worker';
import { register as registerDev } from './commands/dev';
import { register as registerSupervisor } from './commands/supervisor';
import { register as registerSim } from './commands/sim';
import { register as registerDomain } from './commands/domain';

const registrations: ((program: Command) => void)[] = [
  registerFleet,
  registerApi,
  registerDb,
  registerWorker,
  registerSupervisor,
  registerSim,
  registerDomain,
  registerDev,
];

export function buildProgram(): Command {
  const program = new Command('haru')
    .description('Hot failover for self-hosted vLLM fleets at the cost of zero idle GPUs')
    .showHelpAfterError()
    .exitOverride();
  for (const register of registrations) register(program);
  return program;
}

async function main(argv: string[]): Promise<void> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) process.exit(err.exitCode);
    if (err instanceof ConfigError) {
      process.stderr.write(`haru: ${err.message}\n`);
      process.exit(2);
    }
    process.stderr.write(`haru: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
}

if (require.main === module || process.argv[1]?.endsWith('haru.js')) void main(process.argv);
