import { type ChildProcess, spawn } from 'node:child_process';
import { chownSync, closeSync, fstatSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type {
  SupervisorActionResponse,
  SupervisorConfig,
  TrainingExit,
  TrainingRunStatus,
} from '../schemas/supervisor';
import { NoSlotError } from './errors';
import type { Logger } from '../lib/logger';
import {
  cgroupPids,
  createRunCgroup,
  enterCgroupCommand,
  removeCgroup,
  signalCgroup,
  type TrainingTracking,
} from './cgroup';
import { type GroupWalk, leaderFirst, type ProcessTable, signalGroup, signalProcess } from './process-group';
import { type RunAsUser, trainerCommand } from './run-as';
import { DEFAULT_RESTART_POLICY, nextRestart, type RestartPolicy } from './restart-backoff';
import { createKeyedSerializer } from './serial';
import { clearProgress, readProgress } from './training-progress';
import { buildTrainingEnv } from './training-env';
import { openInTrainerDir, readUpTo, replaceInTrainerDir } from './trainer-dir';

type TrainingSlot = SupervisorConfig['training'][number];

/**
 * Where a run's record lives while it is alive, so a restarted supervisor adopts the run: beside its checkpoint
 * dir (`<parent>/.<dir>.haru-training-run.json`), not in it. A `runAs` trainer owns the checkpoint dir, and a
 * supervisor holding capabilities instead of root (no CAP_DAC_OVERRIDE) could not write there; the parent is the
 * supervisor's. Where an operator made the parent the trainer's too, the file is still replaced by rename and
 * read without following a symlink (supervisor/trainer-dir.ts).
 */
export function runFilePath(checkpointDir: string): string {
  return path.join(path.dirname(checkpointDir), `.${path.basename(checkpointDir)}.haru-training-run.json`);
}

/** Larger than any run file the supervisor writes. */
const MAX_RUN_FILE_BYTES = 4096;

/**
 * Grace given to what is left of a run's process group once its leader exited on its own (DataLoader workers,
 * a launcher's children): the same ten seconds the supervisor's own shutdown gives a run by default.
 */
export const ORPHAN_GRACE_MS = 10_000;

/**
 * How often a running run's process group is walked again for members it started since (DataLoader workers, a
 * launcher's children): status answers from the last walk, so a status read never walks /proc itself.
 */
export const MEMBERS_REFRESH_MS = 1_000;

export interface TrainingManagerDeps {
  slots: TrainingSlot[];
  /** The supervisor's environment: a run inherits only its base variables (supervisor/training-env.ts). */
  baseEnv: NodeJS.ProcessEnv;
  /** Working directory of training commands; relative checkpoint dirs resolve against it. */
  cwd: string;
  processTable: ProcessTable;
  now: () => Date;
  logger: Logger;
  /** Where a run's stdout/stderr go. */
  output?: 'inherit' | 'ignore';
  /** Grace given to what is left of a group after its leader exits on its own (default ORPHAN_GRACE_MS). */
  orphanGraceMs?: number;
  /** How often a group is checked for remaining members once its leader is gone. */
  pollMs?: number;
  /** Called once per finished run (metrics). */
  onExit?: (gpuIndex: number, exit: TrainingExit) => void;
  /** This host, recorded in each run file (default currentHost()). */
  host?: HostIdentity;
  /** How a run that crashes while wanted is restarted (default DEFAULT_RESTART_POLICY). */
  restart?: RestartPolicy;
  /** Cgroups or process groups (see detectTracking; default process groups). */
  tracking?: TrainingTracking;
  /** The user each slot's trainer runs as, by GPU (see resolveRunAs). */
  runAs?: ReadonlyMap<number, RunAsUser>;
  /**
   * The supervisor holds capabilities without being root (`ownCapabilities`): a trainer of a slot without
   * `runAs` is started through setpriv dropping them (trainerCommand), or it would inherit them.
   */
  dropCapabilities?: boolean;
  /**
   * Why no run may start (trainingRefusal: no cgroup tracking and no override); every start is refused with it
   * and status shows it. Runs adopted from a previous supervisor are still tracked and can be stopped.
   */
  refusal?: string | null;
}

/** Restart bookkeeping of one slot. */
interface Restarts {
  attempts: number;
  nextAt: Date | null;
  timer: NodeJS.Timeout | null;
  gaveUp: boolean;
}

interface Run {
  slot: TrainingSlot;
  pgid: number;
  /** The run's own cgroup, where one could be made: every process the trainer starts stays in it. */
  cgroup: string | null;
  /** The leader's kernel start time (tells a recycled pid apart). */
  startTime: string | null;
  child: ChildProcess | null;
  startedAt: Date;
  state: 'running' | 'stopping';
  deadlineAt: number | null;
  killTimer: NodeJS.Timeout | null;
  pollTimer: NodeJS.Timeout | null;
  leaderExit: { code: number | null; signal: string | null } | null;
  /** Its process group's members at the last walk of the process table, leader first, and when that walk began. */
  known: number[];
  knownAtMs: number;
  /** The leader or the whole group went away while running, not because of a stop. */
  endedOnItsOwn: boolean;
  done: Promise<void>;
  resolveDone: () => void;
}

interface RunFile {
  pgid: number;
  cgroup?: string | null;
  startTime: string | null;
  startedAt: string;
  /** The host that wrote it: a checkpoint dir on shared storage is never adopted by another host. */
  hostname?: string;
  /** /proc/sys/kernel/random/boot_id: after a reboot the recorded pids mean nothing. */
  bootId?: string | null;
  /** Set once the run is stopping: its SIGKILL deadline, which a restarted supervisor keeps. */
  stopDeadline?: string;
}

/** Which host, and which boot of it, this is. */
export interface HostIdentity {
  hostname: string;
  bootId: string | null;
}

/** This host's identity: its hostname and the kernel's boot id (null where there is no /proc). */
export function currentHost(): HostIdentity {
  let bootId: string | null = null;
  try {
    bootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || null;
  } catch {
    // not Linux
  }
  return { hostname: os.hostname(), bootId };
}

const errorMessage = (err: unknown) => (err instanceof Error ? err.message : String(err));

/**
 * Training runs, one per training slot, each in its own process group. Stop = SIGTERM to the leader (then to
 * what is left of the group once it exits), SIGKILL to the whole group when the grace expires; a second stop can only bring the deadline earlier. A run is over when its group has
 * no live member, so grandchildren never outlive a stop. A run that crashes while wanted (started, not stopped
 * since) is restarted with a bounded backoff. State is in memory, plus a run file in the checkpoint
 * dir through which a restarted supervisor adopts runs that outlived it.
 */
export function createTrainingManager(deps: TrainingManagerDeps) {
  const { logger, processTable } = deps;
  const pollMs = deps.pollMs ?? 100;
  const runs = new Map<number, Run>();
  const lastExits = new Map<number, TrainingExit>();
  const restartPolicy = deps.restart ?? DEFAULT_RESTART_POLICY;
  const host = deps.host ?? currentHost();
  const tracking: TrainingTracking = deps.tracking ?? { kind: 'process-group', reason: 'cgroup tracking not set up' };
  const writeRunFile = (run: Run) => {
    const record: RunFile = {
      pgid: run.pgid,
      cgroup: run.cgroup,
      startTime: run.startTime,
      startedAt: run.startedAt.toISOString(),
      hostname: host.hostname,
      bootId: host.bootId,
      ...(run.state === 'stopping' && run.deadlineAt !== null
        ? { stopDeadline: new Date(run.deadlineAt).toISOString() }
        : {}),
    };
    try {
      // Never writeFileSync: it would follow a symlink the trainer put under that name, as root.
      replaceInTrainerDir(runFile(run.slot), `${JSON.stringify(record)}\n`);
    } catch (err) {
      // Only adoption needs the file: a trainer that blocks the name (a directory there) must not fail a stop.
      logger.warn('training run file not written', { gpuIndex: run.slot.gpuIndex, error: errorMessage(err) });
    }
  };
  /** Slots asked to train (start without a stop since): a crash there is restarted. */
  const wanted = new Set<number>();
  const restarts = new Map<number, Restarts>();
  const serial = createKeyedSerializer<number>();
  const checkpointDir = (slot: TrainingSlot) => path.resolve(deps.cwd, slot.checkpointDir);
  const runFile = (slot: TrainingSlot) => runFilePath(checkpointDir(slot));

  function select(gpuIndex: number | undefined): TrainingSlot[] {
    if (gpuIndex === undefined) return deps.slots;
    const slot = deps.slots.find((s) => s.gpuIndex === gpuIndex);
    if (!slot) throw new NoSlotError('training', gpuIndex);
    return [slot];
  }

  /** The timer of refreshMembers, while any run lives. */
  let refresher: NodeJS.Timeout | null = null;

  function newRun(
    slot: TrainingSlot,
    pgid: number,
    cgroup: string | null,
    startTime: string | null,
    child: ChildProcess | null,
    startedAt: Date,
  ): Run {
    let resolveDone!: () => void;
    const done = new Promise<void>((resolve) => (resolveDone = resolve));
    const run: Run = {
      slot,
      pgid,
      cgroup,
      startTime,
      child,
      startedAt,
      state: 'running',
      deadlineAt: null,
      killTimer: null,
      pollTimer: null,
      leaderExit: null,
      known: [pgid],
      knownAtMs: Date.now(),
      endedOnItsOwn: false,
      done,
      resolveDone,
    };
    runs.set(slot.gpuIndex, run);
    refresher ??= setInterval(
      () =>
        void refreshMembers().catch((err: unknown) =>
          logger.warn('training process walk failed', { error: errorMessage(err) }),
        ),
      MEMBERS_REFRESH_MS,
    );
    refresher.unref();
    return run;
  }

  /** Walks the process table (without blocking) while any run lives: each run's group as it is now. */
  async function refreshMembers(): Promise<void> {
    const walk = await processTable.scanGroups();
    for (const run of runs.values()) learnMembers(run, walk);
  }

  function finish(run: Run): void {
    if (runs.get(run.slot.gpuIndex) !== run) return;
    if (run.killTimer) clearTimeout(run.killTimer);
    if (run.pollTimer) clearInterval(run.pollTimer);
    runs.delete(run.slot.gpuIndex);
    if (runs.size === 0 && refresher) {
      clearInterval(refresher);
      refresher = null;
    }
    rmSync(runFile(run.slot), { force: true });
    if (run.cgroup) removeCgroup(run.cgroup);
    const exit: TrainingExit = {
      code: run.leaderExit?.code ?? null,
      signal: run.leaderExit?.signal ?? null,
      at: deps.now().toISOString(),
    };
    lastExits.set(run.slot.gpuIndex, exit);
    logger.info('training exited', {
      gpuIndex: run.slot.gpuIndex,
      pgid: run.pgid,
      code: exit.code,
      signal: exit.signal,
    });
    deps.onExit?.(run.slot.gpuIndex, exit);
    run.resolveDone();
    const crashed = run.endedOnItsOwn && (exit.code !== 0 || exit.signal !== null);
    if (crashed && wanted.has(run.slot.gpuIndex))
      scheduleRestart(run.slot, deps.now().getTime() - run.startedAt.getTime());
  }

  function cancelRestart(gpuIndex: number): void {
    const pending = restarts.get(gpuIndex);
    if (pending?.timer) clearTimeout(pending.timer);
    restarts.delete(gpuIndex);
  }

  /** Restarts a slot whose run crashed while wanted, after a backoff; gives up after the policy's attempts. */
  function scheduleRestart(slot: TrainingSlot, upForMs: number): void {
    const gpuIndex = slot.gpuIndex;
    const previous = restarts.get(gpuIndex);
    const { attempts, delayMs } = nextRestart(restartPolicy, previous?.attempts ?? 0, upForMs);
    const exit = lastExits.get(gpuIndex);
    if (delayMs === null) {
      restarts.set(gpuIndex, { attempts, nextAt: null, timer: null, gaveUp: true });
      logger.error('training crashed again: not restarting', { gpuIndex, attempts, exit });
      return;
    }
    const timer = setTimeout(() => {
      const entry = restarts.get(gpuIndex);
      if (!entry || entry.timer !== timer || !wanted.has(gpuIndex)) return;
      entry.timer = null;
      entry.nextAt = null;
      logger.info('training restarting', { gpuIndex, attempt: attempts });
      serial(gpuIndex, () => startOne(slot)).catch((err: unknown) => {
        logger.error('training restart failed', { gpuIndex, attempt: attempts, error: errorMessage(err) });
        if (wanted.has(gpuIndex)) scheduleRestart(slot, 0);
      });
    }, delayMs);
    restarts.set(gpuIndex, { attempts, nextAt: new Date(deps.now().getTime() + delayMs), timer, gaveUp: false });
    logger.warn('training crashed: restarting after backoff', { gpuIndex, attempt: attempts, delayMs, exit });
  }

  /**
   * The run's live processes, leader first: its process group and, with a cgroup, everything in the cgroup
   * (a process that left the group by setsid or a double fork is still there).
   */
  function members(run: Run): number[] {
    run.knownAtMs = Date.now();
    run.known = processTable.groupPids(run.pgid);
    return withCgroup(run, run.known);
  }

  /**
   * Takes a run's group from `walk`, unless what the run knows is newer (a walk begun before the run, or before a
   * walk of its own since): false then.
   */
  function learnMembers(run: Run, walk: GroupWalk): boolean {
    if (walk.startedAtMs < run.knownAtMs) return false;
    run.known = leaderFirst([...(walk.groups.get(run.pgid) ?? [])], run.pgid);
    run.knownAtMs = walk.startedAtMs;
    return true;
  }

  /** `groupPids` and, with a cgroup, every live process in it (one file: the kernel keeps it). */
  function withCgroup(run: Run, groupPids: number[]): number[] {
    if (!run.cgroup) return groupPids;
    const extra = cgroupPids(run.cgroup).filter((p) => !groupPids.includes(p) && processTable.isLive(p));
    return [...groupPids, ...extra.sort((a, b) => a - b)];
  }

  /**
   * `members` as status shows them, without walking the process table: the group as last walked, less those
   * that died since (one stat read each), and the cgroup's. A member started since the last walk shows at the
   * next one (MEMBERS_REFRESH_MS); decisions (a stop, a run's end) walk afresh.
   */
  function knownMembers(run: Run): number[] {
    return withCgroup(
      run,
      run.known.filter((pid) => processTable.isLive(pid)),
    );
  }

  /** `signal` to every process of the run: its group, and its cgroup when it has one. */
  function signalAll(run: Run, signal: NodeJS.Signals): void {
    signalGroup(run.pgid, signal);
    if (run.cgroup) signalCgroup(run.cgroup, signal);
  }

  /** The run's leader lives (its pid not taken by another process since: one stat read). */
  const isLeaderAlive = (run: Run): boolean => {
    if (!processTable.isLive(run.pgid)) return false; // gone, or a zombie nobody reaped
    const startTime = processTable.startTime(run.pgid);
    return startTime !== null && (run.startTime === null || startTime === run.startTime);
  };

  /**
   * Finishes the run as soon as it has no live process: looked at now, then every `pollMs` by a walk of the
   * process table that does not block (while a run adopted without an exit event keeps its leader, not even
   * that: the leader's own stat says it lives).
   */
  function watchGroup(run: Run): void {
    const end = () => {
      if (run.state === 'running') run.endedOnItsOwn = true; // an adopted run: no exit event to tell
      finish(run);
    };
    let walking = false;
    const check = async () => {
      if (walking || (run.leaderExit === null && isLeaderAlive(run))) return;
      walking = true;
      try {
        const walk = await processTable.scanGroups();
        if (runs.get(run.slot.gpuIndex) === run && learnMembers(run, walk) && withCgroup(run, run.known).length === 0)
          end();
      } finally {
        walking = false;
      }
    };
    if (members(run).length === 0) return end();
    const poll = () =>
      void check().catch((err: unknown) =>
        logger.warn('training process walk failed', { gpuIndex: run.slot.gpuIndex, error: errorMessage(err) }),
      );
    if (runs.get(run.slot.gpuIndex) === run && !run.pollTimer) run.pollTimer = setInterval(poll, pollMs);
  }

  function killNow(run: Run): void {
    logger.warn('training killed after grace', { gpuIndex: run.slot.gpuIndex, pgid: run.pgid });
    signalAll(run, 'SIGKILL');
  }

  /** Moves the SIGKILL deadline to now + graceMs when that is earlier than the current one. */
  function tighten(run: Run, graceMs: number): void {
    const deadlineAt = deps.now().getTime() + graceMs;
    if (run.deadlineAt !== null && run.deadlineAt <= deadlineAt) return;
    run.deadlineAt = deadlineAt;
    if (run.killTimer) clearTimeout(run.killTimer);
    run.killTimer = setTimeout(() => killNow(run), graceMs);
    if (runs.get(run.slot.gpuIndex) === run) writeRunFile(run);
  }

  /**
   * SIGTERM to the leader alone while it lives: a whole-group SIGTERM kills PyTorch DataLoader workers at once,
   * and the leader then crashes on its next batch before its final checkpoint. The leader stops its workers
   * itself; whatever is left of the group gets SIGTERM once the leader is gone, and SIGKILL at the deadline.
   */
  function beginStop(run: Run, graceMs: number, reason: string): void {
    if (run.state === 'running') {
      run.state = 'stopping';
      const leaderAlive = run.leaderExit === null && isLeaderAlive(run);
      logger.info('training stopping', { gpuIndex: run.slot.gpuIndex, pgid: run.pgid, graceMs, reason });
      if (leaderAlive) signalProcess(run.pgid, 'SIGTERM');
      else signalAll(run, 'SIGTERM');
    }
    tighten(run, graceMs);
  }

  function onLeaderExit(run: Run, code: number | null, signal: string | null): void {
    run.leaderExit = { code, signal };
    if (run.state === 'running') run.endedOnItsOwn = true;
    // Members left behind (dataloaders, launched workers) may still hold VRAM: they get the orphan grace.
    if (run.state === 'running' && members(run).length > 0) {
      beginStop(run, deps.orphanGraceMs ?? ORPHAN_GRACE_MS, 'leader exited');
    } else if (run.state === 'stopping') {
      signalAll(run, 'SIGTERM'); // the leader had its turn: now the rest of the run
    }
    watchGroup(run);
  }

  async function startOne(slot: TrainingSlot): Promise<void> {
    const existing = runs.get(slot.gpuIndex);
    if (existing?.state === 'running') return;
    if (existing) throw new Error(`training on GPU ${slot.gpuIndex} is still stopping`);
    const dir = checkpointDir(slot);
    mkdirSync(dir, { recursive: true });
    const user = deps.runAs?.get(slot.gpuIndex);
    // The last run's progress goes first. The directory is its trainer's, and a supervisor without root cannot
    // unlink in a directory it does not own: it takes it back for that moment (no trainer runs now).
    if (user && process.getuid && process.getgid) chownSync(dir, process.getuid(), process.getgid());
    clearProgress(dir);
    if (user) chownSync(dir, user.uid, user.gid); // its checkpoints are its own; the run file, beside it, ours
    const cgroup = runCgroup(slot);
    const command = trainerCommand(user, slot.command, deps.dropCapabilities ?? false);
    const [file, ...args] = cgroup ? enterCgroupCommand(cgroup, command) : command;
    const child = spawn(file!, args, {
      cwd: deps.cwd,
      env: buildTrainingEnv(deps.baseEnv, slot, dir, user),
      detached: true, // own session and process group: the whole tree is signalled as one
      stdio: ['ignore', deps.output ?? 'ignore', deps.output ?? 'ignore'],
    });
    // The exit may come before we hold a Run: keep it until then.
    const pending: { run?: Run; exit?: [number | null, string | null] } = {};
    child.once('exit', (code, signal) =>
      pending.run ? onLeaderExit(pending.run, code, signal) : (pending.exit = [code, signal]),
    );
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    const pid = child.pid!;
    const run = newRun(slot, pid, cgroup, processTable.startTime(pid), child, deps.now());
    pending.run = run;
    writeRunFile(run);
    logger.info('training started', { gpuIndex: slot.gpuIndex, pgid: pid, command: slot.command[0] });
    if (pending.exit) onLeaderExit(run, ...pending.exit);
  }

  /** A new cgroup for a run of `slot`, or null (process-group tracking, or the cgroup could not be made). */
  function runCgroup(slot: TrainingSlot): string | null {
    if (tracking.kind !== 'cgroup') return null;
    try {
      return createRunCgroup(tracking.parent, `haru-training-gpu${slot.gpuIndex}-${deps.now().getTime()}`);
    } catch (err) {
      logger.warn('training cgroup not created: tracking by process group', {
        gpuIndex: slot.gpuIndex,
        error: errorMessage(err),
      });
      return null;
    }
  }

  /** What finds a run's processes (an idle slot: what its next run gets). */
  function trackingOf(run: Run | undefined): TrainingRunStatus['tracking'] {
    if (run?.cgroup) return { kind: 'cgroup', detail: run.cgroup };
    if (tracking.kind === 'process-group') return { kind: 'process-group', detail: tracking.reason };
    return run
      ? { kind: 'process-group', detail: 'its cgroup could not be created' }
      : { kind: 'cgroup', detail: tracking.parent };
  }

  /**
   * The slot's run file, or null. A trainer running as another user owns its checkpoint dir: a run file not
   * written by us there is not adopted (it could name any process group for us to signal), nor a symlink or a
   * hard link to some other file of ours.
   */
  function readRunFile(slot: TrainingSlot): RunFile | null {
    let fd: number;
    try {
      fd = openInTrainerDir(runFile(slot));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
        logger.warn('training run file ignored', { gpuIndex: slot.gpuIndex, error: errorMessage(err) });
      }
      return null;
    }
    try {
      const stat = fstatSync(fd);
      if (!stat.isFile() || stat.nlink !== 1 || (process.getuid && stat.uid !== process.getuid())) {
        logger.warn('training run file not written by the supervisor ignored', { gpuIndex: slot.gpuIndex });
        return null;
      }
      return JSON.parse(readUpTo(fd, MAX_RUN_FILE_BYTES)) as RunFile;
    } catch {
      return null;
    } finally {
      closeSync(fd);
    }
  }

  /** Adopts a run left by a previous supervisor process when its group is still alive. */
  function adopt(slot: TrainingSlot): void {
    const record = readRunFile(slot);
    if (!record) return;
    if (record.hostname !== undefined && record.hostname !== host.hostname) {
      // Shared checkpoint storage: that host's run, not ours to adopt or remove.
      logger.warn('training run file of another host left alone', { gpuIndex: slot.gpuIndex, host: record.hostname });
      return;
    }
    if (record.bootId && host.bootId && record.bootId !== host.bootId) {
      rmSync(runFile(slot), { force: true }); // written before a reboot: its pids are someone else's now
      return;
    }
    const pids = [...processTable.groupPids(record.pgid), ...(record.cgroup ? cgroupPids(record.cgroup) : [])];
    const leaderRecycled =
      pids.includes(record.pgid) &&
      record.startTime !== null &&
      processTable.startTime(record.pgid) !== record.startTime;
    if (pids.length === 0 || leaderRecycled) {
      rmSync(runFile(slot), { force: true });
      if (record.cgroup) removeCgroup(record.cgroup); // the run died with the previous supervisor: its emptied cgroup
      return;
    }
    const run = newRun(slot, record.pgid, record.cgroup ?? null, record.startTime, null, new Date(record.startedAt));
    if (record.stopDeadline) {
      // It was being stopped when the previous supervisor died: it was asked its SIGTERM, keep its deadline.
      run.state = 'stopping';
      tighten(run, Math.max(0, new Date(record.stopDeadline).getTime() - deps.now().getTime()));
    } else if (!deps.refusal) {
      wanted.add(slot.gpuIndex); // under a refusal a crash is not restarted: that would be a start
    }
    logger.warn('training run adopted', { gpuIndex: slot.gpuIndex, pgid: record.pgid, state: run.state });
    watchGroup(run); // no exit event for a process we did not spawn: poll the group
  }

  for (const slot of deps.slots) adopt(slot);

  return {
    /**
     * Starts training on the selected slots. Idempotent: a running slot is left alone. A slot still stopping
     * or a command that cannot be spawned is reported in `errors`. Throws NoSlotError for an unknown GPU.
     */
    async start(req: { gpuIndex?: number }): Promise<SupervisorActionResponse> {
      const slots = select(req.gpuIndex);
      const errors: SupervisorActionResponse['errors'] = [];
      if (deps.refusal) {
        // Not marked wanted: nothing is restarted behind the refusal.
        for (const slot of slots) errors.push({ target: `training/gpu${slot.gpuIndex}`, message: deps.refusal });
        return { accepted: false, gpuIndexes: slots.map((s) => s.gpuIndex), errors };
      }
      for (const slot of slots) {
        wanted.add(slot.gpuIndex);
        cancelRestart(slot.gpuIndex); // an explicit start starts now and counts afresh
        try {
          // Two concurrent starts must not both spawn: the second waits and then finds the run.
          await serial(slot.gpuIndex, () => startOne(slot));
        } catch (err) {
          errors.push({ target: `training/gpu${slot.gpuIndex}`, message: errorMessage(err) });
        }
      }
      return { accepted: errors.length === 0, gpuIndexes: slots.map((s) => s.gpuIndex), errors };
    },

    /**
     * Asks the selected runs to stop: SIGTERM to the leader now (once), SIGKILL to the whole group at now + graceMs unless a
     * deadline already set is earlier. Returns at once, with the processes of each run it stops (`stopping`);
     * idle slots are a no-op. Throws NoSlotError.
     */
    stop(req: { gpuIndex?: number; graceMs: number }): SupervisorActionResponse {
      const slots = select(req.gpuIndex);
      const stopping: { gpuIndex: number; pids: number[] }[] = [];
      for (const slot of slots) {
        wanted.delete(slot.gpuIndex);
        cancelRestart(slot.gpuIndex);
        const run = runs.get(slot.gpuIndex);
        if (!run) continue;
        stopping.push({ gpuIndex: slot.gpuIndex, pids: members(run) }); // a walk of its own: what is stopped
        beginStop(run, req.graceMs, 'requested');
      }
      return { accepted: true, gpuIndexes: slots.map((s) => s.gpuIndex), errors: [], stopping };
    },

    /** Stops every run with `graceMs` and resolves when no run is left. */
    async stopAll(graceMs: number): Promise<void> {
      for (const slot of deps.slots) {
        wanted.delete(slot.gpuIndex);
        cancelRestart(slot.gpuIndex);
      }
      for (const run of runs.values()) beginStop(run, graceMs, 'supervisor shutdown');
      await Promise.all([...runs.values()].map((r) => r.done));
    },

    /** Resolves when the slot on `gpuIndex` has no run (immediately when idle). */
    async idle(gpuIndex: number): Promise<void> {
      await runs.get(gpuIndex)?.done;
    },

    /**
     * Every training slot: state, live pids of its group (leader first), start time, last exit, restarts, and
     * the trainer's last reported progress.
     */
    status(): TrainingRunStatus[] {
      return deps.slots.map((slot) => {
        const run = runs.get(slot.gpuIndex);
        const restart = restarts.get(slot.gpuIndex);
        return {
          stopDeadline:
            run?.state === 'stopping' && run.deadlineAt !== null ? new Date(run.deadlineAt).toISOString() : null,
          restart: restart
            ? { attempts: restart.attempts, nextAt: restart.nextAt?.toISOString() ?? null, gaveUp: restart.gaveUp }
            : null,
          gpuIndex: slot.gpuIndex,
          state: run?.state ?? 'idle',
          pids: run ? knownMembers(run) : [],
          tracking: trackingOf(run),
          refused: deps.refusal ?? null,
          startedAt: run?.startedAt.toISOString() ?? null,
          lastExit: lastExits.get(slot.gpuIndex) ?? null,
          progress: readProgress(checkpointDir(slot), deps.now()),
        };
      });
    },
  };
}
export type TrainingManager = ReturnType<typeof createTrainingManager>;
