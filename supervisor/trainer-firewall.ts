import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { SupervisorConfig } from '../schemas/supervisor';
import { loadSupervisorEnv, supervisorConfigOf } from './config';
import { resolveRunAs, type RunAsUser } from './run-as';

/** The nftables table the rules live in: replaced whole on every apply, never touched otherwise. */
export const TRAINER_FIREWALL_TABLE = 'haru_trainers';

/** Who may not connect where: the `runAs` users' uids, and the host's vLLM and supervisor ports. */
export interface TrainerFirewall {
  uids: number[];
  ports: number[];
}

/**
 * What the trainers of `config` must not reach on this host: every model's port (vLLM's admin routes, `/sleep`
 * and `/wake_up`, take no credential, and its `--api-key` guards only `/v1` and its kin:
 * vllm/entrypoints/serve/middleware/authenticate.py, followed by sim/vllm/auth.ts) and the supervisor's own.
 * Only slots that run as another user (`runAs`) can be told apart by uid; the rest run as the supervisor.
 */
export function trainerFirewallOf(
  config: SupervisorConfig,
  supervisorPort: number,
  users: ReadonlyMap<number, RunAsUser>,
): TrainerFirewall {
  const uids = [...new Set([...users.values()].map((u) => u.uid))].sort((a, b) => a - b);
  const ports = [
    ...new Set([...config.inference.flatMap((slot) => slot.models.map((m) => m.port)), supervisorPort]),
  ].sort((a, b) => a - b);
  return { uids, ports };
}

/**
 * The nftables script for `rules`, replacing the table whole (declare, delete, define: applies the same on a
 * host that has it and one that does not). A connection from a trainer's uid to one of the ports, over any local
 * address (every one of them leaves through `lo`), is answered with a reset at once: a trainer's client fails
 * fast rather than hanging. Its own loopback traffic (torch.distributed's rendezvous, a dataloader's server)
 * and the network are untouched. No uid: the table is removed and nothing is filtered. Pure.
 */
export function renderTrainerFirewall({ uids, ports }: TrainerFirewall): string {
  const lines = [
    `# Written by \`haru supervisor --trainer-firewall\`: trainers (runAs users) may not connect to this host's vLLM`,
    '# servers or its supervisor (docs/architecture.md §6.4).',
    `table inet ${TRAINER_FIREWALL_TABLE}`,
    `delete table inet ${TRAINER_FIREWALL_TABLE}`,
  ];
  if (uids.length === 0 || ports.length === 0) return `${lines.join('\n')}\n`;
  lines.push(
    `table inet ${TRAINER_FIREWALL_TABLE} {`,
    '  chain output {',
    '    type filter hook output priority filter; policy accept;',
    `    oifname "lo" meta skuid { ${uids.join(', ')} } tcp dport { ${ports.join(', ')} } reject with tcp reset`,
    '  }',
    '}',
  );
  return `${lines.join('\n')}\n`;
}

/** Applies `script` with `nft -f -` (root, or CAP_NET_ADMIN); throws nft's own message when it refuses. */
export function applyNftables(script: string, nft = 'nft'): void {
  execFileSync(nft, ['-f', '-'], { input: script, stdio: ['pipe', 'ignore', 'pipe'] });
}

/**
 * The script for the supervisor this environment configures (the same HARU_SUPERVISOR_CONFIG and PORT it reads):
 * what `haru supervisor --trainer-firewall` applies before the supervisor starts. A `runAs` user the host lacks is
 * refused here as the supervisor would refuse it.
 */
export function trainerFirewallScript(env: NodeJS.ProcessEnv): string {
  const settings = loadSupervisorEnv(env);
  const config = supervisorConfigOf(settings, (file) => readFileSync(file, 'utf8'));
  // The users only: whether the supervisor may switch to them is its own start's check.
  const users = resolveRunAs(config, { uid: 0, hasSetpriv: () => true });
  return renderTrainerFirewall(trainerFirewallOf(config, settings.PORT, users));
}
