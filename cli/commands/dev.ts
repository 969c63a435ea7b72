import type { Command } from 'commander';
import type * as DevMain from '../dev/main';

/** `haru dev`: the whole stack on this machine, configured by environment (see cli/dev/config.ts). */
export function register(program: Command): void {
  program
    .command('dev')
    .description(
      'run the whole stack on this machine: Temporal dev server, embedded Postgres, API, worker and two simulated GPU domains',
    )
    .addHelpText(
      'after',
      `
Environment (blank counts as unset):
  PORT                      Haru API port (default 8700)
  HARU_TEMPORAL_PORT        Temporal dev server gRPC port (default 7233)
  HARU_TEMPORAL_UI_PORT     Temporal Web UI port (default 8233)
  HARU_WORKER_METRICS_PORT  worker /metrics port (default 9464, 0 = any free port)
  HARU_WORKER_SDK_METRICS_PORT  Temporal SDK metrics port (default 9465, 0 = off)
  HARU_SIM_PORT_OFFSET      added to every simulated supervisor and model port (default 0)
  HARU_STATE_DIR            local state: embedded Postgres, Temporal SQLite, logs (default .haru)
  HARU_DEV_LAYOUT           fleet layout to run (default examples/dev.layout.json)
  TEMPORAL_ADDRESS          use this Temporal server instead of starting the dev server
  DATABASE_URL              use this Postgres instead of the embedded database
  HARU_API_TOKEN            require this bearer token on /v1/* (default: open, 127.0.0.1 only)

Ctrl-C stops everything it started; a second Ctrl-C kills at once.`,
    )
    .action(async () => {
      // Loaded on use (it pulls in Temporal and the database); `require` because tsx hooks require, not import().
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const { main } = require('../dev/main') as typeof DevMain;
      await main();
    });
}
