import type { SimGpuInventory } from './gpu-state';
import { updateInventory } from './gpu-state';
import { answers, hasExited, logTail, pollUntil, signalGroup, type SimChild } from './processes';
import { type VllmControlInput, writeControlFile } from './vllm/control';

/** Fault injection for a running domain (see sim/README.md). */
export interface SimFaults {
  /** Replaces `model`'s faults; resolves once they are in force (a refused port refuses, a crash has exited). */
  set(model: string, control: VllmControlInput): Promise<void>;
  /** Clears the faults of `model`, or of every model. */
  clear(model?: string): Promise<void>;
  /** SIGKILLs one fake vLLM; resolves when it is gone. */
  crash(model: string): Promise<void>;
  /** Changes what the fake nvidia-smi reports: MIG, lost GPUs, a driver failure, garbage output. */
  gpu(patch: Partial<Pick<SimGpuInventory, 'mig' | 'lost' | 'fault'>>): void;
}

interface FaultTarget {
  name: string;
  port: number;
  controlFile: string;
  child: SimChild;
}

/** Faults of a domain's fake vLLMs (through their control files) and of its fake nvidia-smi. */
export function createSimFaults(domainSlug: string, targets: FaultTarget[], gpuStateDir: string): SimFaults {
  const byName = (name: string) => {
    const target = targets.find((t) => t.name === name);
    if (!target) throw new Error(`model "${name}" is not in simulated domain "${domainSlug}"`);
    return target;
  };
  const faults: SimFaults = {
    async set(name, control) {
      const target = byName(name);
      writeControlFile(target.controlFile, control);
      if (control.crash) return void (await target.child.exited);
      if (hasExited(target.child)) throw new Error(`fake vLLM "${name}" is not running (crashed or killed)`);
      // Request-path faults apply on the next request (the control file is re-read per request); a refused
      // port needs the fake's poll, so wait until connecting behaves as asked.
      const health = `http://127.0.0.1:${target.port}/health`;
      // An event-loop lag slows /health too (as in vLLM): wait for it beyond the lag.
      const lagMs = Math.max(control.adminLagMs ?? 0, control.adminLagMaxMs ?? 0);
      const settled = await pollUntil(
        async () => (await answers(health, { timeoutMs: 1_000 + lagMs })) === !control.refuse,
        10_000 + lagMs,
      );
      if (!settled) {
        throw new Error(`fake vLLM "${name}" did not apply its faults: ${logTail(target.child.logFile, 500)}`);
      }
    },
    async clear(name) {
      for (const target of name ? [byName(name)] : targets) {
        if (hasExited(target.child)) writeControlFile(target.controlFile, {});
        else await faults.set(target.name, {});
      }
    },
    async crash(name) {
      const { child } = byName(name);
      // An unreaped child keeps its pid: its group id cannot belong to anyone else yet.
      if (!hasExited(child)) signalGroup(child.process.pid, 'SIGKILL');
      await child.exited;
    },
    gpu(patch) {
      updateInventory(gpuStateDir, patch);
    },
  };
  return faults;
}
