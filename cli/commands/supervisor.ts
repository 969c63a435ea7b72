/** `haru supervisor`: the GPU-host agent (environment in README; contract in docs/architecture.md §6). */
import type { Command } from 'commander';
import { runSupervisor } from '../../supervisor/main';
import { applyNftables, trainerFirewallScript } from '../../supervisor/trainer-firewall';

export function register(program: Command): void {
  program
    .command('supervisor')
    .description('run the GPU-host supervisor (HARU_SUPERVISOR_CONFIG, HARU_SUPERVISOR_TOKEN, PORT)')
    .option(
      '--trainer-firewall',
      "instead, apply (nft, as root) the rules that keep runAs trainers off this host's vLLM and supervisor ports, print them and exit",
    )
    .action(async (opts: { trainerFirewall?: boolean }) => {
      if (opts.trainerFirewall) {
        const script = trainerFirewallScript(process.env);
        applyNftables(script);
        process.stdout.write(script);
        return;
      }
      await runSupervisor(process.env);
      await new Promise<never>(() => {}); // serves until a signal makes runSupervisor exit the process
    });
}
