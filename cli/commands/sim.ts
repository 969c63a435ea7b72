/**
 * `haru sim domain` runs one simulated GPU domain of a layout until SIGTERM/SIGINT; `haru sim kill` SIGKILLs a
 * running one like a host losing power. See sim/README.md.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { type Command, InvalidArgumentError } from 'commander';
import { integerArg } from '../arguments';
import { domainToken } from '../../clients/supervisor-access';
import { secretFromEnv } from '../../lib/secret-file';
import { ConfigError, formatZodError, parseEnv } from '../../schemas/env';
import { type FleetLayout, fleetLayoutSchema } from '../../schemas/layout';
import { simEnvSchema, simSupervisorTls } from '../../sim/config';
import { killSimDomain, startSimDomain } from '../../sim/domain';
import { EXIT } from '../exit-codes';

const out = (line: string) => process.stdout.write(`${line}\n`);

function positiveNumber(value: string): number {
  const n = Number(value);
  if (!(n > 0)) throw new InvalidArgumentError('must be a positive number');
  return n;
}

/** Reads and validates a layout file; ConfigError lists every problem. */
export function readLayoutFile(file: string): FleetLayout {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ConfigError(`cannot read layout ${file}: ${(err as Error).message}`);
  }
  const parsed = fleetLayoutSchema.safeParse(json);
  if (!parsed.success) throw new ConfigError(`invalid layout ${file}:\n${formatZodError(parsed.error, '  ')}`);
  return parsed.data;
}

/**
 * The token a simulated domain's supervisor requires: the one its layout names (`supervisor.tokenEnv` or
 * `tokenFile`), else HARU_SUPERVISOR_TOKEN (or its _FILE), as the worker would send it. A `supervisor.issueToken`
 * domain runs on a host Haru launched, whose HARU_SUPERVISOR_TOKEN is the token issued to it (the launch's
 * `--secret`), as on a real host. ConfigError otherwise.
 */
export function simSupervisorToken(layout: FleetLayout, slug: string, env: NodeJS.ProcessEnv): string | undefined {
  const fail = (message: string) => new ConfigError(message);
  const domain = layout.domains.find((d) => d.slug === slug);
  const fleetWide = secretFromEnv(env, 'HARU_SUPERVISOR_TOKEN', { fail });
  return domain && !domain.supervisor?.issueToken ? domainToken(domain, env, fleetWide, { fail }) : fleetWide;
}

/** Where a domain's simulated host keeps its state unless --state-dir says otherwise. */
const defaultStateDir = (domain: string) => path.join('.haru', 'sim', domain);

export function register(program: Command): void {
  const sim = program.command('sim').description('simulated GPU hosts for machines without GPUs');

  sim
    .command('domain')
    .description('run one domain of a layout: fake vLLMs, the supervisor (fake nvidia-smi) and its trainers')
    .requiredOption('--layout <file>', 'fleet layout JSON')
    .requiredOption('--domain <slug>', 'domain of the layout to simulate')
    .option('--state-dir <dir>', 'simulated host state (GPU state, logs, faults); default .haru/sim/<domain>')
    .option('--wake-delay-ms <n>', 'time each vLLM wake takes', integerArg(0))
    .option('--tokens-per-second <n>', 'generation speed of the fake vLLMs', positiveNumber)
    .option('--host <addr>', 'listen address of the supervisor and fake vLLMs (0.0.0.0 needs HARU_SUPERVISOR_TOKEN)')
    .option('--standby', 'start as a standby: engines asleep, training running')
    .action(
      async (opts: {
        layout: string;
        domain: string;
        stateDir?: string;
        wakeDelayMs?: number;
        tokensPerSecond?: number;
        host?: string;
        standby?: boolean;
      }) => {
        const layout = readLayoutFile(opts.layout);
        const env = parseEnv(simEnvSchema, process.env, 'simulated host');
        // The raw environment too: a layout may name the domain's token variable (`supervisor.tokenEnv`).
        const token = simSupervisorToken(layout, opts.domain, process.env);
        const stateDir = opts.stateDir ?? defaultStateDir(opts.domain);
        const domain = await startSimDomain({
          layout,
          domainSlug: opts.domain,
          stateDir,
          wakeDelayMs: opts.wakeDelayMs,
          tokensPerSecond: opts.tokensPerSecond,
          supervisorToken: token,
          host: opts.host,
          role: opts.standby ? 'standby' : 'active',
          tls: simSupervisorTls(env),
        });
        out(
          `simulated domain ${domain.domainSlug} (${opts.standby ? 'standby' : 'active'}), state in ${domain.stateDir}`,
        );
        out(`  supervisor ${domain.supervisorUrl} (pid ${domain.supervisorPid})${token ? '' : ' unauthenticated'}`);
        for (const m of domain.models) out(`  model ${m.name} on GPU ${m.gpuIndex}: ${m.servingUrl} (pid ${m.pid})`);
        out(`  nvidia-smi: HARU_SIM_GPU_STATE=${domain.gpuStateDir} sim/bin/nvidia-smi`);

        const signalled = new Promise<NodeJS.Signals>((resolve) => {
          process.once('SIGTERM', () => resolve('SIGTERM'));
          process.once('SIGINT', () => resolve('SIGINT'));
        });
        const outcome = await Promise.race([
          signalled,
          domain.supervisorExited.then(() => 'supervisor exited' as const),
        ]);
        if (outcome === 'supervisor exited') {
          // The host is gone (killed, or `haru sim kill`): take the rest down too and say so.
          await domain.kill();
          process.stderr.write(`haru: simulated domain ${domain.domainSlug}: supervisor exited; domain stopped\n`);
          process.exitCode = EXIT.failed;
          return;
        }
        out(`${outcome}: stopping simulated domain ${domain.domainSlug}`);
        await domain.stop();
        out('stopped');
      },
    );

  sim
    .command('kill')
    .description('SIGKILL a running simulated domain, like a host losing power')
    .option('--state-dir <dir>', 'state dir of the domain')
    .option('--domain <slug>', 'domain slug (state dir .haru/sim/<domain>)')
    .action(async (opts: { stateDir?: string; domain?: string }) => {
      if (!opts.stateDir && !opts.domain) throw new ConfigError('give --state-dir or --domain');
      const stateDir = opts.stateDir ?? defaultStateDir(opts.domain!);
      const killed = await killSimDomain(stateDir);
      out(killed ? `killed ${killed} processes of the domain in ${stateDir}` : `nothing running from ${stateDir}`);
    });
}
