/** `haru supervisor`: the GPU-host agent (environment in README; contract in docs/architecture.md §6). */
import type { Command } from 'commander';
import { runSupervisor } from '../../supervisor/main';

export function register(program: Command): void {
  program
    .command('supervisor')
    .description('run the GPU-host supervisor (HARU_SUPERVISOR_CONFIG, HARU_SUPERVISOR_TOKEN, PORT)')
    .action(async () => {
      await runSupervisor(process.env);
      await new Promise<never>(() => {}); // serves until a signal makes runSupervisor exit the process
    });
}
