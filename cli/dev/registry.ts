import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../../schemas/env';

const registrySchema = z.object({
  devPid: z.number().int().positive(),
  children: z.array(z.object({ name: z.string(), pid: z.number().int().positive(), marker: z.string() })),
});
export type DevRegistry = z.infer<typeof registrySchema>;

/** What the registry needs from the operating system (injected so tests need no real processes). */
export interface ProcessOps {
  /** True when a process with this pid exists. */
  isAlive(pid: number): boolean;
  /** The process's command line (NUL-separated args joined by spaces); null when unknown. */
  commandLine(pid: number): string | null;
  /** SIGKILL to the process group `pgid`. */
  killGroup(pgid: number): void;
}

/** Linux implementation over /proc and process.kill. */
export const linuxProcessOps: ProcessOps = {
  isAlive(pid) {
    try {
      process.kill(pid, 0);
      return true;
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'EPERM';
    }
  },
  commandLine(pid) {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
    } catch {
      return null;
    }
  },
  killGroup(pgid) {
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {
      // already gone
    }
  },
};

/**
 * The pid file of a running `haru dev` (`<state>/dev/processes.json`): its own pid and the process groups
 * it started. A dev stack that died without cleaning up (SIGKILL, a crash) leaves its children running;
 * the next start finds them here and ends them instead of failing on their ports.
 */
export function createDevRegistry(stateDir: string, ops: ProcessOps = linuxProcessOps) {
  const file = path.join(stateDir, 'dev', 'processes.json');
  const read = (): DevRegistry | null => {
    try {
      return registrySchema.parse(JSON.parse(readFileSync(file, 'utf8')));
    } catch {
      return null;
    }
  };
  const write = (registry: DevRegistry) => {
    mkdirSync(path.dirname(file), { recursive: true });
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify(registry, null, 2));
    renameSync(tmp, file);
  };
  let current: DevRegistry = { devPid: process.pid, children: [] };
  return {
    file,
    /**
     * Claims the state directory for this process. Throws ConfigError when another live `haru dev` holds
     * it. Children left by a dead one are SIGKILLed (only when their command line still matches what was
     * started, so a recycled pid is never touched); returns their names.
     */
    claim(): string[] {
      const previous = read();
      const cleaned: string[] = [];
      if (previous && previous.devPid !== process.pid && ops.isAlive(previous.devPid)) {
        const cmd = ops.commandLine(previous.devPid) ?? '';
        if (/haru|node/.test(cmd)) {
          throw new ConfigError(
            `another haru dev (pid ${previous.devPid}) is running with the state directory ${stateDir}: ` +
              'stop it first, or set HARU_STATE_DIR to another directory',
          );
        }
      }
      for (const child of previous?.children ?? []) {
        const cmd = ops.commandLine(child.pid);
        if (cmd !== null && cmd.includes(child.marker)) {
          ops.killGroup(child.pid);
          cleaned.push(`${child.name} (pid ${child.pid})`);
        }
      }
      current = { devPid: process.pid, children: [] };
      write(current);
      return cleaned;
    },
    /** Records a child (a process-group leader) with a substring of its command line. */
    add(name: string, pid: number, marker: string) {
      current = { ...current, children: [...current.children.filter((c) => c.pid !== pid), { name, pid, marker }] };
      write(current);
    },
    remove(pid: number) {
      current = { ...current, children: current.children.filter((c) => c.pid !== pid) };
      write(current);
    },
    /** Deletes the file (clean shutdown). */
    release() {
      rmSync(file, { force: true });
    },
  };
}
export type DevRegistryHandle = ReturnType<typeof createDevRegistry>;
