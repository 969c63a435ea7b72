import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type {
  SupervisorActionResponse,
  SupervisorConfig,
  TrainingExit,
  TrainingRunStatus,
} from '../schemas/supervisor';
import { NoSlotError } from './errors';
import type { Logger } from '../lib/logger';
import { type ProcessTable, signalGroup } from './process-group';
import { createKeyedSerializer } from './serial';

type TrainingSlot = SupervisorConfig['training'][number];

/** Supervisor variables that never reach a training process. */
export const SUPERVISOR_SECRET_ENV = ['HARU_SUPERVISOR_TOKEN', 'HARU_SUPERVISOR_CONFIG'] as const;

/** Written in the checkpoint dir while a run is alive, so a restarted supervisor adopts the run. */
export const RUN_FILE = '.haru-training-run.json';

/**
 * The environment of a training process: the supervisor's own minus its secrets, plus the slot's `env`, plus
 * `HARU_CHECKPOINT_DIR` and `HARU_GPU_INDEX` (which the slot cannot override). Secrets are removed after the
 * merge, so a slot's `env` cannot put them back either.
 */
export function buildTrainingEnv(
  base: NodeJS.ProcessEnv,
  slot: TrainingSlot,
  checkpointDir: string,
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...base, ...slot.env };
  for (const key of SUPERVISOR_SECRET_ENV) delete env[key];
  env.HARU_CHECKPOINT_DIR = checkpointDir;
  env.HARU_GPU_INDEX = String(slot.gpuIndex);
  return env;
}

export interface TrainingManagerDeps {
  slots: TrainingSlot[];
  /** The supervisor's environment (secrets are stripped per run). */
  baseEnv: NodeJS.ProcessEnv;
  /** Working directory of training commands; relative checkpoint dirs resolve against it. */
  cwd: string;
  processTable: ProcessTable;
  now: () => Date;
  logger: Logger;
  /** Where a run's stdout/stderr go. */
  output?: 'inherit' | 'ignore';
  /** Grace given to what is left of a group after its leader exits on its own. */
  orphanGraceMs: number;
  /** How often a group is checked for remaining members once its leader is gone. */
  pollMs?: number;
  /** Called once per finished run (metrics). */
  onExit?: (gpuIndex: number, exit: TrainingExit) => void;
}

interface Run {
  slot: TrainingSlot;
  pgid: number;
  child: ChildProcess | null;
  startedAt: Date;
  state: 'running' | 'stopping';
  deadlineAt: number | null;
  killTimer: NodeJS.Timeout | null;
  pollTimer: NodeJS.Timeout | null;
  leaderExit: { code: number | null; signal: string | null } | null;
  done: Promise<void>;
  resolveDone: () => void;
}

interface RunFile {
  pgid: number;
  startTime: string | null;
  startedAt: string;
}

const errorMessage = (err: unknown) => (err instanceof Error ? err.message : String(err));

/**
 * Training runs, one per training slot, each in its own process group. Stop = SIGTERM to the group, SIGKILL
 * when the grace expires; a second stop can only bring the deadline earlier. A run is over when its group has
 * no live member, so grandchildren never outlive a stop. State is in memory, plus a run file in the checkpoint
 * dir through which a restarted supervisor adopts runs that outlived it.
 */
export function createTrainingManager(deps: TrainingManagerDeps) {
  const { logger, processTable } = deps;
  const pollMs = deps.pollMs ?? 100;
  const runs = new Map<number, Run>();
  const lastExits = new Map<number, TrainingExit>();
  const serial = createKeyedSerializer<number>();
  const checkpointDir = (slot: TrainingSlot) => path.resolve(deps.cwd, slot.checkpointDir);
  const runFile = (slot: TrainingSlot) => path.join(checkpointDir(slot), RUN_FILE);

  function select(gpuIndex: number | undefined): TrainingSlot[] {
    if (gpuIndex === undefined) return deps.slots;
    const slot = deps.slots.find((s) => s.gpuIndex === gpuIndex);
    if (!slot) throw new NoSlotError('training', gpuIndex);
    return [slot];
  }

  function newRun(slot: TrainingSlot, pgid: number, child: ChildProcess | null, startedAt: Date): Run {
    let resolveDone!: () => void;
    const done = new Promise<void>((resolve) => (resolveDone = resolve));
    const run: Run = {
      slot,
      pgid,
      child,
      startedAt,
      state: 'running',
      deadlineAt: null,
      killTimer: null,
      pollTimer: null,
      leaderExit: null,
      done,
      resolveDone,
    };
    runs.set(slot.gpuIndex, run);
    return run;
  }

  function finish(run: Run): void {
    if (runs.get(run.slot.gpuIndex) !== run) return;
    if (run.killTimer) clearTimeout(run.killTimer);
    if (run.pollTimer) clearInterval(run.pollTimer);
    runs.delete(run.slot.gpuIndex);
    rmSync(runFile(run.slot), { force: true });
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
  }

  /** Finishes the run as soon as its group has no live member. */
  function watchGroup(run: Run): void {
    const check = () => {
      if (processTable.groupPids(run.pgid).length === 0) finish(run);
    };
    check();
    if (runs.get(run.slot.gpuIndex) === run && !run.pollTimer) run.pollTimer = setInterval(check, pollMs);
  }

  function killNow(run: Run): void {
    logger.warn('training killed after grace', { gpuIndex: run.slot.gpuIndex, pgid: run.pgid });
    signalGroup(run.pgid, 'SIGKILL');
  }

  /** Moves the SIGKILL deadline to now + graceMs when that is earlier than the current one. */
  function tighten(run: Run, graceMs: number): void {
    const deadlineAt = deps.now().getTime() + graceMs;
    if (run.deadlineAt !== null && run.deadlineAt <= deadlineAt) return;
    run.deadlineAt = deadlineAt;
    if (run.killTimer) clearTimeout(run.killTimer);
    run.killTimer = setTimeout(() => killNow(run), graceMs);
  }

  function beginStop(run: Run, graceMs: number, reason: string): void {
    if (run.state === 'running') {
      run.state = 'stopping';
      logger.info('training stopping', { gpuIndex: run.slot.gpuIndex, pgid: run.pgid, graceMs, reason });
      signalGroup(run.pgid, 'SIGTERM');
    }
    tighten(run, graceMs);
  }

  function onLeaderExit(run: Run, code: number | null, signal: string | null): void {
    run.leaderExit = { code, signal };
    // Members left behind (dataloaders, launched workers) may still hold VRAM: they get the orphan grace.
    if (run.state === 'running' && processTable.groupPids(run.pgid).length > 0) {
      beginStop(run, deps.orphanGraceMs, 'leader exited');
    }
    watchGroup(run);
  }

  async function startOne(slot: TrainingSlot): Promise<void> {
    const existing = runs.get(slot.gpuIndex);
    if (existing?.state === 'running') return;
    if (existing) throw new Error(`training on GPU ${slot.gpuIndex} is still stopping`);
    const dir = checkpointDir(slot);
    mkdirSync(dir, { recursive: true });
    const [file, ...args] = slot.command;
    const child = spawn(file!, args, {
      cwd: deps.cwd,
      env: buildTrainingEnv(deps.baseEnv, slot, dir),
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
    const run = newRun(slot, pid, child, deps.now());
    pending.run = run;
    const record: RunFile = {
      pgid: pid,
      startTime: processTable.startTime(pid),
      startedAt: run.startedAt.toISOString(),
    };
    writeFileSync(runFile(slot), `${JSON.stringify(record)}\n`);
    logger.info('training started', { gpuIndex: slot.gpuIndex, pgid: pid, command: slot.command[0] });
    if (pending.exit) onLeaderExit(run, ...pending.exit);
  }

  /** Adopts a run left by a previous supervisor process when its group is still alive. */
  function adopt(slot: TrainingSlot): void {
    let record: RunFile;
    try {
      record = JSON.parse(readFileSync(runFile(slot), 'utf8')) as RunFile;
    } catch {
      return;
    }
    const pids = processTable.groupPids(record.pgid);
    const leaderRecycled =
      pids.includes(record.pgid) &&
      record.startTime !== null &&
      processTable.startTime(record.pgid) !== record.startTime;
    if (pids.length === 0 || leaderRecycled) {
      rmSync(runFile(slot), { force: true });
      return;
    }
    const run = newRun(slot, record.pgid, null, new Date(record.startedAt));
    logger.warn('training run adopted', { gpuIndex: slot.gpuIndex, pgid: record.pgid });
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
      for (const slot of slots) {
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
     * Asks the selected runs to stop: SIGTERM now (once), SIGKILL to the whole group at now + graceMs unless a
     * deadline already set is earlier. Returns at once; idle slots are a no-op. Throws NoSlotError.
     */
    stop(req: { gpuIndex?: number; graceMs: number }): SupervisorActionResponse {
      const slots = select(req.gpuIndex);
      for (const slot of slots) {
        const run = runs.get(slot.gpuIndex);
        if (run) beginStop(run, req.graceMs, 'requested');
      }
      return { accepted: true, gpuIndexes: slots.map((s) => s.gpuIndex), errors: [] };
    },

    /** Stops every run with `graceMs` and resolves when no run is left. */
    async stopAll(graceMs: number): Promise<void> {
      for (const run of runs.values()) beginStop(run, graceMs, 'supervisor shutdown');
      await Promise.all([...runs.values()].map((r) => r.done));
    },

    /** Resolves when the slot on `gpuIndex` has no run (immediately when idle). */
    async idle(gpuIndex: number): Promise<void> {
      await runs.get(gpuIndex)?.done;
    },

    /** Every training slot: state, live pids of its group (leader first), start time and last exit. */
    status(): TrainingRunStatus[] {
      return deps.slots.map((slot) => {
        const run = runs.get(slot.gpuIndex);
        return {
          gpuIndex: slot.gpuIndex,
          state: run?.state ?? 'idle',
          pids: run ? processTable.groupPids(run.pgid) : [],
          startedAt: run?.startedAt.toISOString() ?? null,
          lastExit: lastExits.get(slot.gpuIndex) ?? null,
        };
      });
    },
  };
}
export type TrainingManager = ReturnType<typeof createTrainingManager>;
