/**
 * Training runs with real processes and real signals: the fake trainer (sim/trainer.js) in its own process
 * group, SIGTERM then SIGKILL, checkpoints on disk.
 */
import { execFileSync, spawn } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  lchownSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { SupervisorConfig } from '../../schemas/supervisor';
import { isAlive, listLiveHolders, writeInventory } from '../../sim/gpu-state';
import { NoSlotError } from '../../supervisor/errors';
import { createJsonLogger, type Logger, silentLogger } from '../../lib/logger';
import { detectTracking, type TrainingTracking } from '../../supervisor/cgroup';
import { createProcessTable, type ProcessTable } from '../../supervisor/process-group';
import { lookUpUser, type RunAsUser } from '../../supervisor/run-as';
import type { RestartPolicy } from '../../supervisor/restart-backoff';
import {
  createTrainingManager,
  currentHost,
  type HostIdentity,
  runFilePath,
  type TrainingManager,
} from '../../supervisor/training';
import { PROGRESS_ENV, PROGRESS_FILE } from '../../supervisor/training-progress';
import { TRAINER_BASE_ENV } from '../../supervisor/training-env';
import { createSupervisorMetrics } from '../../supervisor/metrics';
import { checkpointStep, tempDirs, TRAINER, trainerEvents, waitFor } from './support';

type Slot = SupervisorConfig['training'][number];

const dirs = tempDirs();
const managers: TrainingManager[] = [];
afterEach(async () => {
  await Promise.all(managers.splice(0).map((m) => m.stopAll(0)));
  dirs.cleanup();
});

const SECRETS = { HARU_SUPERVISOR_TOKEN: 'token-that-must-not-leak', HARU_SUPERVISOR_CONFIG: '{"inference":[]}' };

const MIG = 'MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f';

function setup(
  slot: Partial<Slot> & Pick<Slot, 'command'>,
  opts: {
    orphanGraceMs?: number;
    env?: NodeJS.ProcessEnv;
    restart?: RestartPolicy;
    logger?: Logger;
    tracking?: TrainingTracking;
    runAs?: Map<number, RunAsUser>;
    processTable?: ProcessTable;
  } = {},
) {
  const checkpointDir = path.join(dirs.make(), 'ckpt');
  const full: Slot = { gpuIndex: 1, checkpointDir, ...slot };
  const manager = createTrainingManager({
    slots: [full],
    baseEnv: { ...process.env, ...SECRETS, ...opts.env },
    cwd: path.dirname(checkpointDir),
    processTable: opts.processTable ?? createProcessTable(),
    now: () => new Date(),
    logger: opts.logger ?? silentLogger,
    orphanGraceMs: opts.orphanGraceMs ?? 10_000,
    restart: opts.restart,
    tracking: opts.tracking,
    runAs: opts.runAs,
    pollMs: 20,
  });
  managers.push(manager);
  return { manager, checkpointDir: full.checkpointDir, gpuIndex: full.gpuIndex };
}

const readPid = (dir: string) =>
  existsSync(path.join(dir, 'child.pid')) && readFileSync(path.join(dir, 'child.pid'), 'utf8');

const trainer = (...flags: string[]) => [process.execPath, TRAINER, '--interval-ms', '30', ...flags];

/** Starts and waits for the first checkpoint: by then the trainer's signal handlers are installed. */
async function startTraining(manager: TrainingManager, gpuIndex: number, checkpointDir: string) {
  const res = await manager.start({ gpuIndex });
  expect(res).toEqual({ accepted: true, gpuIndexes: [gpuIndex], errors: [] });
  const before = checkpointStep(checkpointDir);
  await waitFor('a checkpoint', () => checkpointStep(checkpointDir) > before);
  const [run] = manager.status();
  expect(run!.state).toBe('running');
  return run!.pids[0]!;
}

describe('training runs', () => {
  it('escalates to SIGKILL when the trainer ignores SIGTERM, only once the grace has passed', async () => {
    const { manager, checkpointDir, gpuIndex } = setup({ command: trainer('--ignore-sigterm') });
    const pid = await startTraining(manager, gpuIndex, checkpointDir);
    const graceMs = 1_500;
    const stoppedAt = Date.now();
    expect(manager.stop({ gpuIndex, graceMs })).toEqual({
      accepted: true,
      gpuIndexes: [gpuIndex],
      errors: [],
      stopping: [{ gpuIndex, pids: [pid] }],
    });

    // SIGTERM arrived and was ignored: the process lives on, still stopping, within the grace.
    await waitFor('SIGTERM to be ignored', () =>
      trainerEvents(checkpointDir).some((e) => e.event === 'signal ignored'),
    );
    expect(isAlive(pid)).toBe(true);
    expect(manager.status()[0]!.state).toBe('stopping');

    await manager.idle(gpuIndex);
    const killedAfterMs = Date.now() - stoppedAt;
    const [run] = manager.status();
    expect(run!.state).toBe('idle');
    expect(run!.pids).toEqual([]);
    expect(run!.lastExit).toMatchObject({ code: null, signal: 'SIGKILL' });
    expect(killedAfterMs).toBeGreaterThanOrEqual(graceMs - 5); // timers may round down by a millisecond
    expect(isAlive(pid)).toBe(false);
  });

  it('lets a shorter grace given later tighten the kill deadline', async () => {
    const { manager, checkpointDir, gpuIndex } = setup({ command: trainer('--ignore-sigterm') });
    await startTraining(manager, gpuIndex, checkpointDir);
    const stoppedAt = Date.now();
    manager.stop({ gpuIndex, graceMs: 120_000 });
    manager.stop({ gpuIndex, graceMs: 200 });
    await manager.idle(gpuIndex);
    expect(manager.status()[0]!.lastExit?.signal).toBe('SIGKILL');
    expect(Date.now() - stoppedAt).toBeLessThan(120_000);
  });

  it('does not let a longer grace given later extend the kill deadline', async () => {
    const { manager, checkpointDir, gpuIndex } = setup({ command: trainer('--ignore-sigterm') });
    await startTraining(manager, gpuIndex, checkpointDir);
    const stoppedAt = Date.now();
    manager.stop({ gpuIndex, graceMs: 200 });
    manager.stop({ gpuIndex, graceMs: 120_000 });
    await manager.idle(gpuIndex);
    expect(manager.status()[0]!.lastExit?.signal).toBe('SIGKILL');
    expect(Date.now() - stoppedAt).toBeLessThan(120_000);
  });

  it('kills grandchildren with the group even when the leader exits cleanly on SIGTERM', async () => {
    const { manager, checkpointDir, gpuIndex } = setup({ command: trainer('--spawn-child') });
    const leader = await startTraining(manager, gpuIndex, checkpointDir);
    const child = Number(await waitFor('child pid', () => readPid(checkpointDir)));
    await waitFor('child in the group', () => manager.status()[0]!.pids.includes(child));
    expect(manager.status()[0]!.pids[0]).toBe(leader);

    manager.stop({ gpuIndex, graceMs: 1_000 });
    // The leader exits on SIGTERM; the child ignores it and keeps the run stopping until the group SIGKILL.
    await waitFor('the leader to exit', () => !isAlive(leader));
    expect(isAlive(child)).toBe(true);
    expect(manager.status()[0]).toMatchObject({ state: 'stopping', pids: [child] });
    await manager.idle(gpuIndex);
    expect(manager.status()[0]!.lastExit).toMatchObject({ code: 0, signal: null }); // the leader's own exit
    expect(isAlive(leader)).toBe(false);
    expect(isAlive(child)).toBe(false);
  });

  it('answers status without walking the process table: the group as last walked, a worker started since at the next walk', async () => {
    const table = createProcessTable();
    const walks = { sync: 0, scans: 0 };
    const counting: ProcessTable = {
      ...table,
      groupPids: (pgid) => (walks.sync++, table.groupPids(pgid)),
      scanGroups: () => (walks.scans++, table.scanGroups()),
    };
    const { manager, checkpointDir, gpuIndex } = setup(
      { command: trainer('--spawn-child') },
      { processTable: counting },
    );
    const leader = await startTraining(manager, gpuIndex, checkpointDir);
    const child = Number(await waitFor('child pid', () => readPid(checkpointDir)));
    const before = { ...walks };
    for (let i = 0; i < 50; i++) expect(manager.status()[0]!.pids[0]).toBe(leader);
    expect(walks).toEqual(before);
    await waitFor('the child, found by a later walk', () => manager.status()[0]!.pids.includes(child));
    expect(walks.scans).toBeGreaterThan(before.scans);
    expect(walks.sync).toBe(before.sync);
  });

  it('keeps what it knows of a group over a walk that began before it learnt it', async () => {
    const table = createProcessTable();
    let walks = 0;
    // Every walk began long ago and saw nothing: a run started since must not lose its members to it.
    const stale: ProcessTable = {
      ...table,
      scanGroups: async () => (walks++, { startedAtMs: 0, groups: new Map() }),
    };
    const { manager, checkpointDir, gpuIndex } = setup({ command: trainer() }, { processTable: stale });
    const leader = await startTraining(manager, gpuIndex, checkpointDir);
    await waitFor('a walk of the process table', () => walks > 0);
    expect(manager.status()[0]!.pids).toEqual([leader]);
  });

  it('stops the leader first: its DataLoader-like workers live on until it has written its final checkpoint', async () => {
    const { manager, checkpointDir, gpuIndex } = setup({ command: trainer('--workers', '2') });
    await startTraining(manager, gpuIndex, checkpointDir);
    const workers = await waitFor('workers in the group', () => {
      const pids = manager.status()[0]!.pids;
      return pids.length === 3 && pids.slice(1);
    });
    manager.stop({ gpuIndex, graceMs: 10_000 });
    await manager.idle(gpuIndex);
    const events = trainerEvents(checkpointDir).map((e) => e.event);
    expect(events).toContain('final checkpoint');
    expect(events).not.toContain('crashed');
    expect(manager.status()[0]!.lastExit).toMatchObject({ code: 0, signal: null });
    expect(workers.filter(isAlive)).toEqual([]);
  });

  it('the fake trainer crashes before its checkpoint when its whole group gets SIGTERM, as a PyTorch one does', async () => {
    const checkpointDir = path.join(dirs.make(), 'ckpt');
    const child = spawn(process.execPath, [TRAINER, '--interval-ms', '30', '--workers', '2'], {
      env: { ...process.env, HARU_CHECKPOINT_DIR: checkpointDir, HARU_GPU_INDEX: '0' },
      detached: true,
      stdio: 'ignore',
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    await waitFor(
      'workers and a checkpoint',
      () =>
        trainerEvents(checkpointDir).some((e) => e.event === 'workers started') && checkpointStep(checkpointDir) > 0,
    );
    process.kill(-child.pid!, 'SIGTERM');
    expect(await exited).toBe(1);
    const events = trainerEvents(checkpointDir).map((e) => e.event);
    expect(events).toContain('crashed');
    expect(events).not.toContain('final checkpoint');
  });

  it('writes a final checkpoint on SIGTERM and resumes from it on the next start', async () => {
    const { manager, checkpointDir, gpuIndex } = setup({ command: trainer() });
    await startTraining(manager, gpuIndex, checkpointDir);
    await waitFor('three steps', () => checkpointStep(checkpointDir) >= 3);
    manager.stop({ gpuIndex, graceMs: 10_000 });
    await manager.idle(gpuIndex);
    expect(manager.status()[0]!.lastExit).toMatchObject({ code: 0, signal: null });
    const saved = JSON.parse(readFileSync(path.join(checkpointDir, 'checkpoint.json'), 'utf8')) as {
      step: number;
      final: boolean;
    };
    expect(saved.final).toBe(true);
    expect(existsSync(runFilePath(checkpointDir))).toBe(false);

    await startTraining(manager, gpuIndex, checkpointDir);
    const starts = trainerEvents(checkpointDir).filter((e) => e.event === 'started');
    expect(starts.map((e) => e.resumedFromStep)).toEqual([0, saved.step]);
    expect(checkpointStep(checkpointDir)).toBeGreaterThan(saved.step);
  });

  it('lets a trainer that is slow to exit finish within the grace without a SIGKILL', async () => {
    const { manager, checkpointDir, gpuIndex } = setup({ command: trainer('--exit-delay-ms', '400') });
    await startTraining(manager, gpuIndex, checkpointDir);
    manager.stop({ gpuIndex, graceMs: 30_000 });
    await waitFor('the trainer to start stopping', () =>
      trainerEvents(checkpointDir).some((e) => e.event === 'stopping'),
    );
    expect(manager.status()[0]!.state).toBe('stopping');
    await manager.idle(gpuIndex);
    expect(manager.status()[0]!.lastExit).toMatchObject({ code: 0, signal: null });
    expect(trainerEvents(checkpointDir).map((e) => e.event)).toContain('final checkpoint');
  });

  it.each([
    ['GPU 1', {}, { gpuIndex: 1 }],
    ['its MIG instance', { mig: MIG }, { gpuIndex: 1, migUuid: MIG }],
  ])('puts a trainer that ignores HARU_GPU_INDEX (cuda:0) on %s, not on GPU 0', async (_where, slot, expected) => {
    const gpuState = path.join(dirs.make(), 'gpu');
    writeInventory(gpuState, {
      gpus: [0, 1].map((index) => ({ index, uuid: `GPU-${index}`, name: 'NVIDIA H100 80GB HBM3', totalMiB: 81_559 })),
      mig: {
        privileged: true,
        instances: [{ gpuIndex: 1, gi: 1, ci: 0, uuid: MIG, profile: '7g.80gb', totalMiB: 81_000 }],
      },
      baselineMiB: 4,
      fault: null,
    });
    const { manager, checkpointDir, gpuIndex } = setup(
      { command: trainer('--cuda-device-0'), env: { HARU_SIM_GPU_STATE: gpuState }, ...slot },
      { env: { CUDA_VISIBLE_DEVICES: '0,1' } }, // as Ray hands every GPU down
    );
    const pid = await startTraining(manager, gpuIndex, checkpointDir);
    const holders = listLiveHolders(gpuState).filter((h) => h.pid === pid);
    expect(holders).toEqual([expect.objectContaining({ ...expected, usedMiB: 20_000 })]);
  });

  it('restarts a run that crashed while wanted, with growing backoff, and gives up after the attempts', async () => {
    const lines: string[] = [];
    const logger = createJsonLogger({ write: (line) => lines.push(line), level: 'info', base: {} });
    const restart = { baseMs: 100, maxMs: 150, maxAttempts: 2, resetAfterMs: 60_000 };
    const { manager, checkpointDir, gpuIndex } = setup(
      { command: trainer('--crash-after-ms', '150') },
      { restart, logger },
    );
    await manager.start({ gpuIndex });
    const gaveUp = await waitFor('the restarts to be spent', () => {
      const run = manager.status()[0]!;
      return run.restart?.gaveUp && run.state === 'idle' && run;
    });
    expect(gaveUp).toMatchObject({ restart: { attempts: 2, nextAt: null, gaveUp: true }, lastExit: { code: 1 } });
    expect(trainerEvents(checkpointDir).filter((e) => e.event === 'started')).toHaveLength(3);
    const logged = lines.map((l) => JSON.parse(l) as { msg: string; delayMs?: number; attempt?: number });
    expect(logged.filter((l) => l.msg === 'training crashed: restarting after backoff').map((l) => l.delayMs)).toEqual([
      100, 150,
    ]);
    expect(logged.map((l) => l.msg)).toContain('training crashed again: not restarting');

    await startTraining(manager, gpuIndex, checkpointDir); // an explicit start counts afresh
    expect(manager.status()[0]!.restart).toBeNull();
  });

  it('reports a pending restart in status, and a stop cancels it', async () => {
    const restart = { baseMs: 300, maxMs: 300, maxAttempts: 5, resetAfterMs: 60_000 };
    const { manager, checkpointDir, gpuIndex } = setup({ command: trainer('--crash-after-ms', '100') }, { restart });
    await manager.start({ gpuIndex });
    const pending = await waitFor(
      'a pending restart',
      () => manager.status()[0]!.restart?.nextAt && manager.status()[0]!,
    );
    expect(pending).toMatchObject({ state: 'idle', restart: { attempts: 1, gaveUp: false } });
    manager.stop({ gpuIndex, graceMs: 1_000 });
    expect(manager.status()[0]!.restart).toBeNull();
    await new Promise((resolve) => setTimeout(resolve, 3 * restart.baseMs)); // what must not happen: no restart
    expect(trainerEvents(checkpointDir).filter((e) => e.event === 'started')).toHaveLength(1);
  });

  it('gives the trainer only its base variables, its slot’s env and the contract: no secret of the supervisor', async () => {
    const dump =
      "require('fs').writeFileSync(process.env.HARU_CHECKPOINT_DIR + '/env.json', JSON.stringify(process.env))";
    // Secrets a supervisor may hold that no deny-list names: a trainer must see none of them.
    const unlisted = { AWS_SECRET_ACCESS_KEY: 'cloud-key-must-not-leak', HARU_API_TOKEN: 'api-token-must-not-leak' };
    const { manager, checkpointDir, gpuIndex } = setup(
      {
        command: [process.execPath, '-e', dump],
        env: {
          LORA_RANK: '16',
          HARU_SUPERVISOR_TOKEN: 'smuggled',
          HARU_GPU_INDEX: '7',
          CUDA_VISIBLE_DEVICES: '0,1,2,3',
          CUDA_DEVICE_ORDER: 'FASTEST_FIRST',
        },
      },
      { env: unlisted },
    );
    await manager.start({ gpuIndex });
    await manager.idle(gpuIndex);
    expect(manager.status()[0]!.lastExit).toMatchObject({ code: 0, signal: null });
    const env = JSON.parse(readFileSync(path.join(checkpointDir, 'env.json'), 'utf8')) as Record<string, string>;
    expect(env).not.toHaveProperty('HARU_SUPERVISOR_TOKEN');
    expect(env).not.toHaveProperty('HARU_SUPERVISOR_CONFIG');
    expect(JSON.stringify(env)).not.toContain(SECRETS.HARU_SUPERVISOR_TOKEN);
    for (const [name, value] of Object.entries(unlisted)) {
      expect(env).not.toHaveProperty(name);
      expect(JSON.stringify(env)).not.toContain(value);
    }
    const allowed = [...TRAINER_BASE_ENV, 'LORA_RANK', 'HARU_CHECKPOINT_DIR', 'HARU_GPU_INDEX', PROGRESS_ENV];
    const unexpected = Object.keys(env).filter(
      (name) => !allowed.includes(name) && !name.startsWith('LC_') && !name.startsWith('CUDA_'),
    );
    expect(unexpected).toEqual([]);
    expect(env).toMatchObject({
      LORA_RANK: '16',
      HARU_GPU_INDEX: String(gpuIndex),
      HARU_CHECKPOINT_DIR: checkpointDir,
      CUDA_VISIBLE_DEVICES: String(gpuIndex),
      CUDA_DEVICE_ORDER: 'PCI_BUS_ID',
    });
    expect(env.PATH).toBe(process.env.PATH);
  });

  it('records a crashed leader and kills what it left behind after the orphan grace', async () => {
    // The leader starts a child that ignores SIGTERM, waits until the child is ready, then crashes.
    const childScript =
      "process.on('SIGTERM', () => {}); require('fs').writeFileSync(process.env.HARU_CHECKPOINT_DIR + '/child.pid', String(process.pid)); setInterval(() => {}, 1000)";
    const script =
      `require('child_process').spawn(process.execPath, ['-e', ${JSON.stringify(childScript)}], { stdio: 'ignore' });` +
      "const t = setInterval(() => { if (require('fs').existsSync(process.env.HARU_CHECKPOINT_DIR + '/child.pid')) { clearInterval(t); process.exit(3); } }, 20);";
    const { manager, checkpointDir, gpuIndex } = setup(
      { command: [process.execPath, '-e', script] },
      { orphanGraceMs: 300 },
    );
    await manager.start({ gpuIndex });
    const childPid = Number(await waitFor('child pid', () => readPid(checkpointDir)));
    await manager.idle(gpuIndex);
    expect(manager.status()[0]).toMatchObject({ state: 'idle', pids: [], lastExit: { code: 3, signal: null } });
    expect(isAlive(childPid)).toBe(false);
  });

  it('treats a second start as a no-op, refuses a start while stopping, and reports a command that cannot run', async () => {
    const { manager, checkpointDir, gpuIndex } = setup({ command: trainer('--ignore-sigterm') });
    const pid = await startTraining(manager, gpuIndex, checkpointDir);
    expect(await manager.start({ gpuIndex })).toEqual({ accepted: true, gpuIndexes: [gpuIndex], errors: [] });
    expect(manager.status()[0]!.pids[0]).toBe(pid);

    manager.stop({ gpuIndex, graceMs: 60_000 });
    const refused = await manager.start({ gpuIndex });
    expect(refused.accepted).toBe(false);
    expect(refused.errors[0]!.message).toMatch(/still stopping/);
    manager.stop({ gpuIndex, graceMs: 0 });
    await manager.idle(gpuIndex);

    const missing = setup({ command: ['/nonexistent/trainer-binary'] });
    const res = await missing.manager.start({ gpuIndex: missing.gpuIndex });
    expect(res.accepted).toBe(false);
    expect(res.errors[0]).toMatchObject({ target: `training/gpu${missing.gpuIndex}` });
    expect(res.errors[0]!.message).toMatch(/ENOENT/);
    expect(missing.manager.status()[0]!.state).toBe('idle');
  });

  it('starts one process when two starts arrive at once', async () => {
    const { manager, checkpointDir, gpuIndex } = setup({ command: trainer() });
    const answers = await Promise.all([manager.start({ gpuIndex }), manager.start({ gpuIndex })]);
    expect(answers.map((a) => a.accepted)).toEqual([true, true]);
    await waitFor('a checkpoint', () => checkpointStep(checkpointDir) > 0);
    expect(manager.status()[0]!.pids).toHaveLength(1);
    expect(trainerEvents(checkpointDir).filter((e) => e.event === 'started')).toHaveLength(1);
  });

  it('throws NoSlotError for a GPU without a training slot', async () => {
    const { manager } = setup({ command: trainer() });
    await expect(manager.start({ gpuIndex: 5 })).rejects.toBeInstanceOf(NoSlotError);
    expect(() => manager.stop({ gpuIndex: 5, graceMs: 0 })).toThrow(NoSlotError);
  });

  it('adopts a run left behind by a previous supervisor process and can stop it', async () => {
    const { manager, checkpointDir, gpuIndex } = setup({ command: trainer('--ignore-sigterm') });
    const pid = await startTraining(manager, gpuIndex, checkpointDir);
    const restarted = createTrainingManager({
      slots: [{ gpuIndex, checkpointDir, command: trainer() }],
      baseEnv: process.env,
      cwd: path.dirname(checkpointDir),
      processTable: createProcessTable(),
      now: () => new Date(),
      logger: silentLogger,
      orphanGraceMs: 1_000,
      pollMs: 20,
    });
    managers.push(restarted);
    expect(restarted.status()[0]).toMatchObject({ state: 'running', pids: [pid] });
    restarted.stop({ gpuIndex, graceMs: 200 });
    await restarted.idle(gpuIndex);
    expect(isAlive(pid)).toBe(false);
    expect(restarted.status()[0]!.lastExit).toMatchObject({ code: null, signal: null }); // not our child: unknown
    await manager.idle(gpuIndex);
    expect(manager.status()[0]!.lastExit?.signal).toBe('SIGKILL');
  });

  const restartedManager = (checkpointDir: string, gpuIndex: number, host?: HostIdentity) => {
    const restarted = createTrainingManager({
      slots: [{ gpuIndex, checkpointDir, command: trainer() }],
      baseEnv: process.env,
      cwd: path.dirname(checkpointDir),
      processTable: createProcessTable(),
      now: () => new Date(),
      logger: silentLogger,
      orphanGraceMs: 1_000,
      pollMs: 20,
      host,
    });
    managers.push(restarted);
    return restarted;
  };

  it('adopts a run that was stopping as stopping, keeping its deadline and sending no second SIGTERM', async () => {
    const { manager, checkpointDir, gpuIndex } = setup({ command: trainer('--ignore-sigterm') });
    const pid = await startTraining(manager, gpuIndex, checkpointDir);
    manager.stop({ gpuIndex, graceMs: 60_000 });
    const deadline = manager.status()[0]!.stopDeadline;
    expect(deadline).toEqual(expect.any(String));
    await waitFor('the SIGTERM', () => trainerEvents(checkpointDir).some((e) => e.event === 'signal ignored'));
    const record = JSON.parse(readFileSync(runFilePath(checkpointDir), 'utf8')) as Record<string, unknown>;
    expect(record).toMatchObject({
      pgid: pid,
      hostname: os.hostname(),
      bootId: currentHost().bootId,
      stopDeadline: deadline,
    });

    const restarted = restartedManager(checkpointDir, gpuIndex);
    expect(restarted.status()[0]).toMatchObject({ state: 'stopping', pids: [pid], stopDeadline: deadline });
    expect(trainerEvents(checkpointDir).filter((e) => e.event === 'signal ignored')).toHaveLength(1);
    restarted.stop({ gpuIndex, graceMs: 100 }); // a shorter grace still tightens it
    await restarted.idle(gpuIndex);
    expect(isAlive(pid)).toBe(false);
  });

  it("leaves another host's run file alone and drops one written before this host's last boot", async () => {
    const { manager, checkpointDir, gpuIndex } = setup({ command: trainer() });
    const pid = await startTraining(manager, gpuIndex, checkpointDir);
    const file = runFilePath(checkpointDir);
    const elsewhere = restartedManager(checkpointDir, gpuIndex, { hostname: 'other-host', bootId: 'b' });
    expect(elsewhere.status()[0]).toMatchObject({ state: 'idle', pids: [] });
    expect(existsSync(file)).toBe(true);
    const rebooted = restartedManager(checkpointDir, gpuIndex, { hostname: os.hostname(), bootId: 'a-later-boot' });
    expect(rebooted.status()[0]).toMatchObject({ state: 'idle', pids: [] });
    expect(existsSync(file)).toBe(false);
    expect(isAlive(pid)).toBe(true); // not ours to touch: the first manager still runs it
  });
});

const escapedPid = (dir: string) =>
  existsSync(path.join(dir, 'escaped.pid')) && Number(readFileSync(path.join(dir, 'escaped.pid'), 'utf8'));

const cgroups = detectTracking();
if (cgroups.kind !== 'cgroup') console.warn(`skipping cgroup tracking tests: ${cgroups.reason}`);
const describeCgroup = cgroups.kind === 'cgroup' ? describe : describe.skip;

describeCgroup('training tracked by a cgroup', () => {
  it('finds and stops a worker that left the process group (setsid, double fork)', async () => {
    const { manager, checkpointDir, gpuIndex } = setup({ command: trainer('--escape') }, { tracking: cgroups });
    const leader = await startTraining(manager, gpuIndex, checkpointDir);
    const escaped = await waitFor('the escaped worker', () => escapedPid(checkpointDir));
    const stat = readFileSync(`/proc/${escaped}/stat`, 'utf8');
    expect(Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2])).not.toBe(leader); // not in the group
    const [run] = manager.status();
    expect(run!.pids).toEqual([leader, ...run!.pids.slice(1)]);
    expect(run!.pids).toContain(escaped);
    expect(run!.tracking).toEqual({ kind: 'cgroup', detail: expect.stringContaining(`haru-training-gpu${gpuIndex}-`) });
    const cgroup = run!.tracking!.detail;
    manager.stop({ gpuIndex, graceMs: 10_000 });
    await manager.idle(gpuIndex);
    expect(isAlive(escaped)).toBe(false);
    await waitFor('the emptied cgroup removed', () => !existsSync(cgroup)); // removed once empty
    expect(manager.status()[0]).toMatchObject({ state: 'idle', pids: [] });
  });

  it('SIGKILLs the whole cgroup at the deadline, escaped workers included', async () => {
    const { manager, checkpointDir, gpuIndex } = setup(
      { command: trainer('--escape', '--ignore-sigterm') },
      { tracking: cgroups },
    );
    await startTraining(manager, gpuIndex, checkpointDir);
    const escaped = await waitFor('the escaped worker', () => escapedPid(checkpointDir));
    manager.stop({ gpuIndex, graceMs: 300 });
    await manager.idle(gpuIndex);
    expect(isAlive(escaped)).toBe(false);
    expect(manager.status()[0]!.lastExit).toMatchObject({ signal: 'SIGKILL' });
  });
});

describe('training progress (the trainer replaces $HARU_TRAINING_PROGRESS_FILE)', () => {
  it('shows the step, total and loss the trainer last reported, with their age, and keeps them once it stopped', async () => {
    const { manager, checkpointDir, gpuIndex } = setup({ command: trainer('--total-steps', '500') });
    await startTraining(manager, gpuIndex, checkpointDir);
    const seen = await waitFor('a reported step past 2', () => {
      const p = manager.status()[0]!.progress;
      return p && p.step !== null && p.step > 2 && p;
    });
    expect(seen).toMatchObject({ totalSteps: 500, error: null });
    expect(seen.loss).toBeCloseTo(2 / (1 + seen.step! / 100));
    expect(seen.ageMs).toBeGreaterThanOrEqual(0);
    const metrics = createSupervisorMetrics({ trainingStatus: () => manager.status() });
    const step = Number(
      (await metrics.registry.metrics()).match(/^haru_supervisor_training_step\{gpu="1"\} (\d+)$/m)?.[1],
    );
    expect(step).toBeGreaterThanOrEqual(seen.step!);
    manager.stop({ gpuIndex, graceMs: 5_000 });
    await manager.idle(gpuIndex);
    const final = checkpointStep(checkpointDir);
    const after = manager.status()[0]!;
    expect(after.state).toBe('idle');
    expect(after.progress).toMatchObject({ step: final, totalSteps: 500, error: null });
    // When it was reported is the file's mtime; the age counts from there.
    const reportedAt = statSync(path.join(checkpointDir, PROGRESS_FILE)).mtime;
    expect(after.progress!.at).toBe(reportedAt.toISOString());
    expect(after.progress!.ageMs).toBeGreaterThanOrEqual(0);
  });

  it("starts a run without the last run's figure: nothing until the new run reports", async () => {
    const { manager, checkpointDir, gpuIndex } = setup({ command: trainer('--interval-ms', '60000') });
    mkdirSync(checkpointDir, { recursive: true });
    writeFileSync(path.join(checkpointDir, PROGRESS_FILE), JSON.stringify({ step: 999 }));
    expect(manager.status()[0]!.progress).toMatchObject({ step: 999, totalSteps: null, loss: null });
    expect(await manager.start({ gpuIndex })).toMatchObject({ accepted: true });
    expect(manager.status()[0]).toMatchObject({ state: 'running', progress: null });
  });

  it('reports a progress file it cannot use as an error, never following a symlink or blocking on a FIFO', () => {
    const { manager, checkpointDir } = setup({ command: trainer() });
    mkdirSync(checkpointDir, { recursive: true });
    const file = path.join(checkpointDir, PROGRESS_FILE);
    const progress = () => manager.status()[0]!.progress;

    writeFileSync(file, '{"step": "ten"}');
    expect(progress()).toMatchObject({
      step: null,
      error: `${PROGRESS_FILE}: step: Invalid input: expected number, received string`,
    });
    writeFileSync(file, 'step=10');
    expect(progress()).toMatchObject({ step: null, error: `${PROGRESS_FILE} is not JSON` });
    rmSync(file);
    const secret = path.join(checkpointDir, 'secret.json');
    writeFileSync(secret, JSON.stringify({ step: 7 }));
    symlinkSync(secret, file);
    expect(progress()).toMatchObject({ step: null, error: expect.stringMatching(/^cannot open .*ELOOP/) });
    rmSync(file);
    execFileSync('mkfifo', [file]);
    expect(progress()).toMatchObject({ step: null, error: `${PROGRESS_FILE} is not a regular file` });
  });
});

describe('training tracked by its process group (no cgroup to be had)', () => {
  const escapedPids: number[] = [];
  afterAll(() => escapedPids.forEach((pid) => isAlive(pid) && process.kill(pid, 'SIGKILL')));

  it('says so in status, with the reason, and still stops the group', async () => {
    const reason = 'cannot create a cgroup under its own /sys/fs/cgroup/x (EACCES)';
    const { manager, checkpointDir, gpuIndex } = setup(
      { command: trainer('--escape') },
      { tracking: { kind: 'process-group', reason } },
    );
    const leader = await startTraining(manager, gpuIndex, checkpointDir);
    const escaped = await waitFor('the escaped worker', () => escapedPid(checkpointDir));
    escapedPids.push(escaped);
    const [run] = manager.status();
    expect(run!.tracking).toEqual({ kind: 'process-group', detail: reason });
    expect(run!.pids).toEqual([leader]); // what the fallback cannot see
    manager.stop({ gpuIndex, graceMs: 10_000 });
    await manager.idle(gpuIndex);
    expect(isAlive(leader)).toBe(false);
    expect(trainerEvents(checkpointDir).map((e) => e.event)).toContain('final checkpoint');
    expect(isAlive(escaped)).toBe(true); // the limitation a cgroup removes
  });
});

const nobody = lookUpUser('nobody');
const runAsUnavailable =
  process.getuid?.() !== 0 ? 'the supervisor is not root' : !nobody ? 'the host has no user nobody' : null;
if (runAsUnavailable) console.warn(`skipping runAs tests: ${runAsUnavailable}`);

(runAsUnavailable ? describe.skip : describe)('a trainer run as another user (runAs)', () => {
  it('runs as that user with its own checkpoint dir and cannot read the supervisor’s environment', async () => {
    const script =
      'id -u > "$HARU_CHECKPOINT_DIR/uid"; echo "$HOME" > "$HARU_CHECKPOINT_DIR/home";' +
      ' cat /proc/$PPID/environ > /dev/null 2> "$HARU_CHECKPOINT_DIR/denied"; exec sleep 60';
    const { manager, checkpointDir, gpuIndex } = setup(
      { command: ['/bin/sh', '-c', script], runAs: 'nobody' },
      { runAs: new Map([[1, nobody!]]), tracking: cgroups.kind === 'cgroup' ? cgroups : undefined },
    );
    chmodSync(path.dirname(checkpointDir), 0o755); // the temp dir is root's 0700: let the user reach its dir
    await manager.start({ gpuIndex });
    const denied = await waitFor('the trainer to try', () => {
      const text =
        existsSync(path.join(checkpointDir, 'denied')) && readFileSync(path.join(checkpointDir, 'denied'), 'utf8');
      return text && text.trim() ? text : false;
    });
    expect(denied).toMatch(/Permission denied/);
    expect(readFileSync(path.join(checkpointDir, 'uid'), 'utf8').trim()).toBe(String(nobody!.uid));
    expect(readFileSync(path.join(checkpointDir, 'home'), 'utf8').trim()).toBe(nobody!.home);
    const [run] = manager.status();
    expect(readFileSync(`/proc/${run!.pids[0]}/status`, 'utf8')).toMatch(new RegExp(`^Uid:\\s+${nobody!.uid}\\s`, 'm'));
    manager.stop({ gpuIndex, graceMs: 5_000 });
    await manager.idle(gpuIndex);
    expect(manager.status()[0]!.lastExit).toMatchObject({ signal: 'SIGTERM' });
  });

  /** A root-owned 0600 file outside the trainer's reach, with known contents. */
  const rootOnlyFile = (text: string) => {
    const file = path.join(dirs.make(), 'root-only');
    writeFileSync(file, text, { mode: 0o600 });
    return file;
  };

  it('keeps its run file beside the checkpoint dir, where the trainer cannot replace it', async () => {
    const script =
      'while [ ! -e "$RUN" ]; do sleep 0.02; done; ln -sf /etc/hostname "$RUN" 2> "$HARU_CHECKPOINT_DIR/denied"; exec sleep 60';
    const checkpointDir = path.join(dirs.make(), 'ckpt');
    const { manager, gpuIndex } = setup(
      { command: ['/bin/sh', '-c', script], runAs: 'nobody', checkpointDir, env: { RUN: runFilePath(checkpointDir) } },
      { runAs: new Map([[1, nobody!]]), tracking: cgroups.kind === 'cgroup' ? cgroups : undefined },
    );
    chmodSync(path.dirname(checkpointDir), 0o755); // the supervisor's (root's) parent, readable by the trainer
    await manager.start({ gpuIndex });
    const denied = await waitFor('the trainer to try', () => {
      const file = path.join(checkpointDir, 'denied');
      const text = existsSync(file) && readFileSync(file, 'utf8');
      return text && text.trim() ? text : false;
    });
    expect(denied).toMatch(/Permission denied/);
    expect(lstatSync(runFilePath(checkpointDir))).toMatchObject({ uid: 0 });
    expect(lstatSync(runFilePath(checkpointDir)).isFile()).toBe(true);
    expect(statSync(checkpointDir)).toMatchObject({ uid: nobody!.uid }); // the checkpoints are the trainer's
    manager.stop({ gpuIndex, graceMs: 5_000 });
    await manager.idle(gpuIndex);
  });

  it('never writes through a symlink the trainer put in place of its run file where the parent is its own too', async () => {
    const target = rootOnlyFile('root secret\n');
    // The trainer waits for the supervisor's run file, then swaps it for a symlink to the root-owned file.
    const script =
      'f="$RUN"; while [ ! -e "$f" ]; do sleep 0.02; done;' +
      ' ln -sf "$TARGET" "$f" && touch "$HARU_CHECKPOINT_DIR/planted"; exec sleep 60';
    // An operator who put the checkpoint dir in a directory of the trainer's (its home, say).
    const parent = path.join(dirs.make(), 'trainer-home');
    mkdirSync(parent);
    chownSync(parent, nobody!.uid, nobody!.gid);
    const checkpointDir = path.join(parent, 'ckpt');
    const { manager, gpuIndex } = setup(
      {
        command: ['/bin/sh', '-c', script],
        runAs: 'nobody',
        checkpointDir,
        env: { TARGET: target, RUN: runFilePath(checkpointDir) },
      },
      { runAs: new Map([[1, nobody!]]), tracking: cgroups.kind === 'cgroup' ? cgroups : undefined },
    );
    chmodSync(path.dirname(parent), 0o755);
    await manager.start({ gpuIndex });
    await waitFor('the symlink planted', () => existsSync(path.join(checkpointDir, 'planted')));
    const file = runFilePath(checkpointDir);
    expect(lstatSync(file)).toMatchObject({ uid: nobody!.uid });
    expect(lstatSync(file).isSymbolicLink()).toBe(true);

    manager.stop({ gpuIndex, graceMs: 5_000 }); // records the stop deadline in the run file
    expect(readFileSync(target, 'utf8')).toBe('root secret\n');
    expect(statSync(target)).toMatchObject({ uid: 0, mode: 0o100600 });
    expect(lstatSync(file).isFile()).toBe(true); // the symlink itself was replaced
    expect(JSON.parse(readFileSync(file, 'utf8'))).toMatchObject({ stopDeadline: manager.status()[0]!.stopDeadline });
    await manager.idle(gpuIndex);
    expect(readFileSync(target, 'utf8')).toBe('root secret\n');
  });

  it('adopts no run through a symlink the trainer put in place of its run file', async () => {
    // A file of root's elsewhere that reads as a run file: it names a live process group that is not the trainer's.
    const victim = spawn('sleep', ['60'], { detached: true, stdio: 'ignore' });
    try {
      const pgid = victim.pid!;
      const record = { pgid, startTime: createProcessTable().startTime(pgid), startedAt: new Date().toISOString() };
      const target = rootOnlyFile(JSON.stringify({ ...record, ...currentHost() }));
      const checkpointDir = path.join(dirs.make(), 'ckpt');
      mkdirSync(checkpointDir);
      chownSync(checkpointDir, nobody!.uid, nobody!.gid);
      symlinkSync(target, runFilePath(checkpointDir));
      lchownSync(runFilePath(checkpointDir), nobody!.uid, nobody!.gid); // planted by the trainer
      const restarted = createTrainingManager({
        slots: [{ gpuIndex: 1, checkpointDir, command: trainer(), runAs: 'nobody' }],
        baseEnv: process.env,
        cwd: path.dirname(checkpointDir),
        processTable: createProcessTable(),
        now: () => new Date(),
        logger: silentLogger,
        orphanGraceMs: 1_000,
        pollMs: 20,
        runAs: new Map([[1, nobody!]]),
      });
      managers.push(restarted);
      expect(restarted.status()[0]).toMatchObject({ state: 'idle', pids: [] });
      expect(isAlive(pgid)).toBe(true);
    } finally {
      victim.kill('SIGKILL');
    }
  });
});
