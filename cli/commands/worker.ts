import type { Command } from 'commander';
import type * as WorkerMain from '../../workers/main';

/** `haru worker`: runs Haru's Temporal workflows and activities (configured by environment, see workers/config.ts). */
export function register(program: Command): void {
  program
    .command('worker')
    .description('run a Haru worker: promotions, demotions and fleet monitors (TEMPORAL_ADDRESS, HARU_TASK_QUEUE)')
    .action(async () => {
      // Loaded on use (it pulls in Temporal and the database); `require` because tsx hooks require, not import().
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const { main } = require('../../workers/main') as typeof WorkerMain;
      await main();
    });
}
