import { readFileSync, readlinkSync } from 'node:fs';
import type { GpuPidSpace } from '../../schemas/supervisor';
import type { GpuReading } from './types';

/**
 * The initial PID namespace as `readlink /proc/self/ns/pid` prints it: its inode is the fixed
 * PROC_PID_INIT_INO (0xEFFFFFFC, include/linux/proc_ns.h), so any other value means a container's namespace.
 */
export const INIT_PID_NAMESPACE = 'pid:[4026531836]';

/**
 * The `NSpid:` line of `/proc/<pid>/status` (proc(5), Linux 4.1+): the process's pid in each PID namespace it
 * is a member of, from the namespace of that /proc's mount down to its own. Null without the line.
 */
export function parseNsPid(status: string): number[] | null {
  const line = /^NSpid:\s*(.*)$/m.exec(status);
  if (!line) return null;
  const pids = line[1]!.trim().split(/\s+/).map(Number);
  return pids.length > 0 && pids.every((p) => Number.isInteger(p) && p > 0) ? pids : null;
}

/** How the vendor tool's pids (always the host's: the NVIDIA driver knows no PID namespaces) become ours. */
export interface PidTranslator {
  space: GpuPidSpace;
  /** The supervisor-namespace pid of host pid `pid`; null for a process of another namespace. */
  translate(pid: number): number | null;
}

const tryRead = <T>(read: () => T): T | null => {
  try {
    return read();
  } catch {
    return null;
  }
};

/**
 * Decides how to read the tool's pids, once per read (cheap: two small /proc files):
 *  - in the initial namespace (on the host, or `--pid=host`): they are ours (`own`);
 *  - in a container with the host's /proc mounted at `hostProc` (e.g. `-v /proc:/host/proc:ro`): a host pid
 *    whose process is in our namespace (`<hostProc>/<pid>/ns/pid` is ours) maps to the last entry of its
 *    `NSpid` (`mapped`); any other is another namespace's;
 *  - in a container without it: none can be mapped (`unmapped`).
 * `proc` is this namespace's /proc. Throws, naming HARU_HOST_PROC, when `hostProc` is not an ancestor
 * namespace's /proc that shows this very process.
 */
export function createPidTranslator(opts: { proc?: string; hostProc?: string }): () => PidTranslator {
  const proc = opts.proc ?? '/proc';
  return () => {
    const ownNs = tryRead(() => readlinkSync(`${proc}/self/ns/pid`));
    if (ownNs === null || ownNs === INIT_PID_NAMESPACE) return { space: 'own', translate: (pid) => pid };
    if (!opts.hostProc) return { space: 'unmapped', translate: () => null };
    const hostProc = opts.hostProc;
    const self = tryRead(() => parseNsPid(readFileSync(`${hostProc}/self/status`, 'utf8')));
    if (!self || self.length < 2 || self.at(-1) !== process.pid) {
      throw new Error(
        `HARU_HOST_PROC=${hostProc} is not the host's /proc (its self/status NSpid is ${self?.join(' ') ?? 'missing'}, not <host pid> … ${process.pid})`,
      );
    }
    return {
      space: 'mapped',
      translate(pid) {
        const ns = tryRead(() => readlinkSync(`${hostProc}/${pid}/ns/pid`));
        if (ns !== ownNs) return null; // another container's, or the host's: not one of ours
        const nsPids = tryRead(() => parseNsPid(readFileSync(`${hostProc}/${pid}/status`, 'utf8')));
        return nsPids?.at(-1) ?? null;
      },
    };
  };
}

/**
 * Rewrites the readings' processes into the supervisor's namespace: mapped pids replace the host's, the rest
 * are marked `foreign` and keep the host's number. Readings of the supervisor's own namespace are unchanged.
 */
export function inPidSpace(readings: GpuReading[], translator: PidTranslator): GpuReading[] {
  if (translator.space === 'own') return readings;
  return readings.map((gpu) => ({
    ...gpu,
    pidSpace: translator.space,
    processes: gpu.processes.map((p) => {
      const pid = translator.translate(p.pid);
      return pid === null ? { ...p, foreign: true } : { ...p, pid };
    }),
  }));
}
