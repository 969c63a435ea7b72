import type { Command } from 'commander';
import { z } from 'zod';
import { fleetSnapshotSchema } from '../../schemas/entities';
import type { DomainState } from '../../schemas/enums';
import { provisioningAcceptedResponseSchema, teardownAlreadyStoppedResponseSchema } from '../../schemas/provisioning';
import type { ApiClient } from '../api-client';
import { apiClientFor } from '../connection';
import { isData, type OutputOptions, renderData } from '../output';
import { registerDomainStatus } from './status';
import { EXIT, type ExitCode } from '../exit-codes';

const answerSchema = z.union([provisioningAcceptedResponseSchema, teardownAlreadyStoppedResponseSchema]);

/** What the provision/teardown commands need: the API, an output line writer, and a pause between polls. */
export interface DomainCommandDeps {
  api: ApiClient;
  write: (line: string) => void;
  wait: (ms: number) => Promise<void>;
  /** Pause between two reads of the domain while waiting (default 1 s). */
  pollMs?: number;
}

export interface DomainCommandOptions extends OutputOptions {
  reason?: string;
  /** Teardown only: `sky stop` instead of `sky down`. */
  stop?: boolean;
  wait?: boolean;
}

const fleetPath = (fleet: string) => `/v1/fleets/${encodeURIComponent(fleet)}`;

/** The states that end a wait: success first, then failure. */
const ENDS: Record<'provision' | 'teardown', { ok: DomainState; failed: DomainState }> = {
  provision: { ok: 'ready', failed: 'failed' },
  teardown: { ok: 'stopped', failed: 'failed' },
};

/**
 * `haru domain provision|teardown <fleet> <domain>`: asks the API to start the workflow and prints its
 * id. With `wait`, follows the domain's state until it is ready/stopped (returns 0) or failed (returns 1,
 * with the domain's last error). Throws ApiError for a refusal.
 */
export async function runDomainCommand(
  deps: DomainCommandDeps,
  kind: 'provision' | 'teardown',
  fleet: string,
  domain: string,
  opts: DomainCommandOptions,
): Promise<ExitCode> {
  const body = {
    ...(kind === 'teardown' ? { mode: opts.stop ? 'stop' : 'down' } : {}),
    ...(opts.reason ? { reason: opts.reason } : {}),
  };
  const path = `${fleetPath(fleet)}/domains/${encodeURIComponent(domain)}/${kind}`;
  // Read before asking: a domain that is `failed` already only ends the wait once it changed since.
  const before = opts.wait ? await deps.api.get(fleetPath(fleet), fleetSnapshotSchema) : null;
  const { body: answer } = await deps.api.post(path, body, answerSchema);
  if (answer.status === 'already_stopped') {
    deps.write(isData(opts) ? renderData(answer, opts) : `domain ${domain} is already stopped`);
    return EXIT.ok;
  }
  const started = `${answer.status}: ${kind} of ${domain} (workflow ${answer.workflowId})`;
  if (!opts.wait) {
    deps.write(isData(opts) ? renderData(answer, opts) : started);
    return EXIT.ok;
  }
  deps.write(started);
  const initialChange = before?.domains.find((d) => d.id === answer.domainId)?.stateChangedAt;
  const end = ENDS[kind];
  let last: DomainState | null = null;
  for (;;) {
    const snapshot = await deps.api.get(fleetPath(fleet), fleetSnapshotSchema);
    const row = snapshot.domains.find((d) => d.id === answer.domainId);
    if (!row) throw new Error(`domain ${domain} is no longer in fleet ${fleet}`);
    if (row.state !== last) {
      deps.write(`  domain ${row.slug}: ${row.state}`);
      last = row.state;
    }
    const changed = row.stateChangedAt !== initialChange;
    if (row.state === end.ok && changed) {
      if (isData(opts)) deps.write(renderData(row, opts));
      return EXIT.ok;
    }
    if (row.state === end.failed && changed) {
      deps.write(`${kind} of ${row.slug} failed: ${row.lastError ?? 'no reason recorded'}`);
      if (isData(opts)) deps.write(renderData(row, opts));
      return EXIT.failed;
    }
    await deps.wait(deps.pollMs ?? 1_000);
  }
}

/** `haru domain provision|teardown|status`: a client of the Haru API (cli/connection.ts). */
export function register(program: Command): void {
  const domain = program
    .command('domain')
    .description('provision and tear down skypilot/skyserve domains, and show one, through the Haru API');
  registerDomainStatus(domain);
  const deps = (cmd: Command): DomainCommandDeps => ({
    api: apiClientFor(cmd),
    write: (line) => process.stdout.write(`${line}\n`),
    wait: (ms) => new Promise((r) => setTimeout(r, ms)),
  });

  domain
    .command('provision <fleet> <domain>')
    .description('launch <domain> (sky launch / sky serve up), wait for its supervisor, put it on standby')
    .option('--reason <text>', 'why (recorded on the workflow)')
    .option('--wait', 'follow the domain until it is ready (exit 0) or failed (exit 1)')
    .option('--json', 'print JSON')
    .action(async (fleet: string, ref: string, opts: DomainCommandOptions, cmd: Command) => {
      process.exitCode = await runDomainCommand(deps(cmd), 'provision', fleet, ref, opts);
    });

  domain
    .command('teardown <fleet> <domain>')
    .description('stop training, sleep, and take <domain> down (sky down / sky serve down); never the active')
    .option('--stop', 'sky stop instead of sky down (keeps the disks; skypilot only)')
    .option('--reason <text>', 'why (recorded on the workflow)')
    .option('--wait', 'follow the domain until it is stopped (exit 0) or failed (exit 1)')
    .option('--json', 'print JSON')
    .action(async (fleet: string, ref: string, opts: DomainCommandOptions, cmd: Command) => {
      process.exitCode = await runDomainCommand(deps(cmd), 'teardown', fleet, ref, opts);
    });
}
