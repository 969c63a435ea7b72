import type { Command } from 'commander';

/** `haru api`: the control API and OpenAI-compatible proxy (configured by environment, see api/config.ts). */
export function register(program: Command): void {
  program
    .command('api')
    .description('run the Haru API: control plane, route intent and the OpenAI-compatible proxy (PORT, default 8700)')
    .action(async () => {
      const { main } = await import('../../api/main');
      await main();
    });
}
