import type { Command } from 'commander';
import type * as ApiMain from '../../api/main';

/** `haru api`: the control API and OpenAI-compatible proxy (configured by environment, see api/config.ts). */
export function register(program: Command): void {
  program
    .command('api')
    .description('run the Haru API: control plane, route intent and the OpenAI-compatible proxy (PORT, default 8700)')
    .action(async () => {
      // Loaded on use (it pulls in Temporal and the database); `require` because tsx hooks require, not import().
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const { main } = require('../../api/main') as typeof ApiMain;
      await main();
    });
}
