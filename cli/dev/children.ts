import type { ChildProcess } from 'node:child_process';

/** How a child ended: its exit code, or the signal that ended it. */
export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A child process the dev stack started in its own process group, so it can be stopped as a whole. */
export interface ManagedChild {
  name: string;
  pid: number;
  /** Settles when the process is gone. */
  exited: Promise<ChildExit>;
  isRunning(): boolean;
  /**
   * SIGTERM to the whole process group, SIGKILL to the group after `graceMs`. Resolves once the leader
   * is gone and the group is empty (or after the SIGKILL). Idempotent.
   */
  stop(graceMs?: number): Promise<void>;
}

/** Sends `signal` to process group `pgid`; false when the group no longer exists. */
export function signalGroup(pgid: number, signal: NodeJS.Signals | 0, kill = process.kill): boolean {
  try {
    kill(-pgid, signal);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw err;
  }
}

/**
 * Wraps a child spawned with `detached: true` (so it leads its own process group: a Ctrl-C in the
 * terminal reaches only `haru dev`, which then stops its children in order). `stop` ends the child's
 * whole group, grandchildren included.
 */
export function manageChild(
  name: string,
  child: ChildProcess,
  opts: { wait?: (ms: number) => Promise<void> } = {},
): ManagedChild {
  if (child.pid === undefined) throw new Error(`${name} did not start`);
  const pid = child.pid;
  const wait = opts.wait ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref()));
  let running = true;
  const exited = new Promise<ChildExit>((resolve) => {
    child.once('exit', (code, signal) => {
      running = false;
      resolve({ code, signal });
    });
  });
  let stopping: Promise<void> | undefined;
  const groupGone = async (deadline: number) => {
    // The leader may exit before the rest of its group (a supervisor still stopping a trainer).
    while (Date.now() < deadline) {
      if (!signalGroup(pid, 0)) return true;
      await wait(50);
    }
    return !signalGroup(pid, 0);
  };
  return {
    name,
    pid,
    exited,
    isRunning: () => running,
    stop(graceMs = 10_000) {
      stopping ??= (async () => {
        if (!signalGroup(pid, 'SIGTERM')) return;
        const deadline = Date.now() + graceMs;
        const timer = new Promise<'timeout'>((resolve) => {
          const t = setTimeout(() => resolve('timeout'), graceMs);
          t.unref();
        });
        await Promise.race([exited, timer]);
        if (!(await groupGone(deadline))) signalGroup(pid, 'SIGKILL');
        await exited;
        await groupGone(Date.now() + 2_000);
      })();
      return stopping;
    },
  };
}
