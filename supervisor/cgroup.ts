import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { signalProcess } from './process-group';

/**
 * How training runs are tracked: a cgroup v2 child per run under the supervisor's own cgroup (every process
 * the trainer starts stays in it, whatever it does with sessions and process groups: setsid, double forks,
 * daemons), or, where the supervisor cannot create one, the run's process group, with the reason.
 */
export type TrainingTracking = { kind: 'cgroup'; parent: string } | { kind: 'process-group'; reason: string };

/** The cgroup v2 path in `/proc/self/cgroup` (the `0::<path>` line; cgroups(7)), or null on a v1-only host. */
export function parseOwnCgroup(procSelfCgroup: string): string | null {
  return /^0::(\/.*)$/m.exec(procSelfCgroup)?.[1]?.trim() ?? null;
}

/**
 * The cgroup2 mount of `/proc/self/mountinfo` (proc(5): field 4 is the mount's root, field 5 its mount point,
 * the filesystem type follows ` - `), or null when cgroup v2 is not mounted.
 */
export function parseCgroup2Mount(mountinfo: string): { root: string; mountPoint: string } | null {
  for (const line of mountinfo.split('\n')) {
    const [fields, after] = line.split(' - ');
    if (!after || after.split(' ')[0] !== 'cgroup2') continue;
    const cols = fields!.split(' ');
    if (cols.length >= 5) return { root: cols[3]!, mountPoint: cols[4]! };
  }
  return null;
}

// Not `instanceof Error`: fs errors may come from another realm (jest's sandbox).
const why = (err: unknown) => (err && typeof err === 'object' && 'message' in err ? String(err.message) : String(err));

/**
 * Where this supervisor may make run cgroups: its own cgroup v2 directory, when it can create (and remove) a
 * child there, i.e. it runs as root or in a subtree delegated to it (systemd `Delegate=yes`). Otherwise the
 * process-group fallback, with the reason in words.
 */
export function detectTracking(opts: { proc?: string } = {}): TrainingTracking {
  const proc = opts.proc ?? '/proc';
  let own: string | null;
  let mount: ReturnType<typeof parseCgroup2Mount>;
  try {
    own = parseOwnCgroup(readFileSync(`${proc}/self/cgroup`, 'utf8'));
    mount = parseCgroup2Mount(readFileSync(`${proc}/self/mountinfo`, 'utf8'));
  } catch (err) {
    return { kind: 'process-group', reason: `no /proc to find cgroups in (${why(err)})` };
  }
  if (!own || !mount) return { kind: 'process-group', reason: 'cgroup v2 is not mounted on this host' };
  const relative = path.posix.relative(mount.root, own);
  if (relative.startsWith('..')) {
    return { kind: 'process-group', reason: `its cgroup ${own} is outside the cgroup2 mount's root ${mount.root}` };
  }
  const parent = path.join(mount.mountPoint, relative);
  const probe = path.join(parent, `haru-probe-${process.pid}`);
  try {
    mkdirSync(probe);
    const usable = existsSync(path.join(probe, 'cgroup.procs'));
    rmdirSync(probe);
    if (!usable) return { kind: 'process-group', reason: `${parent} is not a cgroup v2 directory` };
  } catch (err) {
    return {
      kind: 'process-group',
      reason: `cannot create a cgroup under its own ${parent} (${why(err)}): run it as root or with a delegated cgroup (systemd Delegate=yes)`,
    };
  }
  return { kind: 'cgroup', parent };
}

/** The variable that lets training run tracked by process group alone. */
export const ALLOW_PGROUP_ENV = 'HARU_TRAINING_ALLOW_PGROUP';

/**
 * Why the supervisor refuses to start training under `tracking`, or null when it starts it: with a cgroup, or
 * by process group when the operator said so (HARU_TRAINING_ALLOW_PGROUP=1). A trainer that leaves its process
 * group (setsid, a daemonised worker, a double fork) is invisible to process-group tracking: a stop would
 * report the GPU free while it still holds the memory the wake needs, so that is opt-in, never a silent fallback.
 */
export function trainingRefusal(tracking: TrainingTracking, allowProcessGroup: boolean): string | null {
  if (tracking.kind === 'cgroup' || allowProcessGroup) return null;
  return (
    `training refused: no cgroup to track its processes in (${tracking.reason}); a trainer that leaves its ` +
    'process group would outlive a stop. Run the supervisor as root or with a delegated cgroup (systemd ' +
    `Delegate=yes), or set ${ALLOW_PGROUP_ENV}=1 to track runs by process group`
  );
}

/** Makes the cgroup of one run under `parent`. */
export function createRunCgroup(parent: string, name: string): string {
  const dir = path.join(parent, name);
  mkdirSync(dir);
  return dir;
}

/** The pids in cgroup `dir` (as this PID namespace numbers them); empty once it is gone. */
export function cgroupPids(dir: string): number[] {
  try {
    return readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** Sends `signal` to every process of cgroup `dir`; SIGKILL goes through `cgroup.kill` (Linux 5.14+) where present. */
export function signalCgroup(dir: string, signal: NodeJS.Signals): void {
  if (signal === 'SIGKILL' && existsSync(path.join(dir, 'cgroup.kill'))) {
    try {
      writeFileSync(path.join(dir, 'cgroup.kill'), '1');
      return;
    } catch {
      // fall through to one signal per process
    }
  }
  for (const pid of cgroupPids(dir)) signalProcess(pid, signal);
}

const REMOVE_RETRY_MS = 50;
const REMOVE_RETRIES = 40;

/**
 * Removes an emptied run cgroup. The kernel may still count a just-killed process for a moment after
 * `cgroup.procs` reads empty (rmdir answers EBUSY), so EBUSY is retried every 50 ms for up to 2 s in the
 * background; a cgroup that still holds processes after that is left to the next run's clean-up.
 */
export function removeCgroup(dir: string, retriesLeft = REMOVE_RETRIES): void {
  try {
    rmdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EBUSY' || retriesLeft <= 0) return; // gone, or left as said
    setTimeout(() => removeCgroup(dir, retriesLeft - 1), REMOVE_RETRY_MS).unref();
  }
}

/**
 * The command that puts itself into cgroup `dir` before it becomes the trainer: a shell writes its own pid to
 * `cgroup.procs` and then execs the command, so the leader keeps its pid and nothing it starts is ever
 * outside the cgroup (a move after the spawn could miss a child forked meanwhile).
 */
export function enterCgroupCommand(dir: string, command: readonly string[]): string[] {
  return ['/bin/sh', '-c', 'echo $$ > "$0" && exec "$@"', path.join(dir, 'cgroup.procs'), ...command];
}
