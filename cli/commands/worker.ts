import type { Command } from 'commander';

/** `haru worker`: runs Haru's Temporal workflows and activities (configured by environment, see workers/config.ts). */
export function register(program: Command): void {
  program
    .command('worker')
    .description('run a Haru worker: promotions, demotions and fleet monitors (TEMPORAL_ADDRESS, HARU_TASK_QUEUE)')
    .action(async () => {
      const { main } = await import('../../workers/main');
      await main();
    });
}
