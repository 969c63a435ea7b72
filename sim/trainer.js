#!/usr/bin/env node
'use strict';
/* global setInterval, setTimeout, clearInterval */
/**
 * A fake preemptible LoRA trainer. It behaves like a well-mannered training job towards the supervisor:
 *  - resumes from `$HARU_CHECKPOINT_DIR/checkpoint.json` (a step counter) and writes it every interval;
 *  - holds VRAM on `$HARU_GPU_INDEX` under its own pid in the simulated GPU state (HARU_SIM_GPU_STATE);
 *  - on SIGTERM (or SIGINT) writes a final checkpoint and exits 0.
 * Options (flag or env var; flags win):
 *   --interval-ms N      HARU_SIM_TRAINER_INTERVAL_MS      checkpoint every N ms (default 200)
 *   --vram-mib N         HARU_SIM_TRAINER_VRAM_MIB         VRAM held while training (default 20000)
 *   --ignore-sigterm     HARU_SIM_TRAINER_IGNORE_SIGTERM=1 ignore SIGTERM, so only SIGKILL stops it
 *   --exit-delay-ms N    HARU_SIM_TRAINER_EXIT_DELAY_MS    take N ms to exit after SIGTERM (slow shutdown)
 *   --spawn-child        HARU_SIM_TRAINER_SPAWN_CHILD=1    start a worker child that ignores SIGTERM (a
 *                                                          dataloader that only dies with its process group)
 *   --workers N          HARU_SIM_TRAINER_WORKERS          start N DataLoader-like workers in the group: they die
 *                                                          on SIGTERM (as PyTorch's do), and a worker that dies
 *                                                          before the final checkpoint crashes the leader (exit 1,
 *                                                          no checkpoint), as "DataLoader worker (pid N) is killed
 *                                                          by signal: Terminated" does. The leader stops them
 *                                                          itself after its final checkpoint.
 *   --cuda-device-0      HARU_SIM_TRAINER_CUDA_DEVICE_0=1  ignore HARU_GPU_INDEX and hold memory where `cuda:0`
 *                                                          is, as a PyTorch trainer does: the first device of
 *                                                          CUDA_VISIBLE_DEVICES (an index, a GPU-/MIG- UUID),
 *                                                          else GPU 0
 *   --crash-after-ms N   HARU_SIM_TRAINER_CRASH_AFTER_MS   crash (exit 1, no final checkpoint) N ms after starting
 *   --total-steps N      HARU_SIM_TRAINER_TOTAL_STEPS      the run's length it reports (reported as null when unset;
 *                                                          it trains on past it, as a preemptible job does)
 *   --escape             HARU_SIM_TRAINER_ESCAPE=1         start a worker that leaves the process group as a daemon
 *                                                          does (setsid, then a second fork whose parent exits,
 *                                                          like `docker run -d` or a Ray worker) and holds
 *                                                          --vram-mib on the GPU until it gets SIGTERM; its pid
 *                                                          goes to escaped.pid. Only a cgroup still finds it.
 * Every event is appended as a JSON line to `$HARU_CHECKPOINT_DIR/trainer.log`. Each step is reported as a real
 * trainer does (supervisor/training-progress.ts): `{step, totalSteps, loss}` replacing `$HARU_TRAINING_PROGRESS_FILE`.
 */
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const gpuState = require('./gpu-state.js');

function option(flag, envName, fallback) {
  const argv = process.argv.slice(2);
  const i = argv.indexOf(flag);
  if (i !== -1) {
    const next = argv[i + 1];
    return next === undefined || next.startsWith('--') ? '1' : next;
  }
  const env = process.env[envName];
  return env === undefined || env === '' ? fallback : env;
}
const isTrue = (v) => ['1', 'true', 'yes', 'on'].includes(String(v).toLowerCase());

const checkpointDir = process.env.HARU_CHECKPOINT_DIR;
const gpuIndex = Number(process.env.HARU_GPU_INDEX);
if (!checkpointDir || !Number.isInteger(gpuIndex)) {
  process.stderr.write('trainer: HARU_CHECKPOINT_DIR and HARU_GPU_INDEX are required\n');
  process.exit(2);
}
const intervalMs = Number(option('--interval-ms', 'HARU_SIM_TRAINER_INTERVAL_MS', '200'));
const vramMiB = Number(option('--vram-mib', 'HARU_SIM_TRAINER_VRAM_MIB', '20000'));
const ignoreSigterm = isTrue(option('--ignore-sigterm', 'HARU_SIM_TRAINER_IGNORE_SIGTERM', '0'));
const exitDelayMs = Number(option('--exit-delay-ms', 'HARU_SIM_TRAINER_EXIT_DELAY_MS', '0'));
const spawnChild = isTrue(option('--spawn-child', 'HARU_SIM_TRAINER_SPAWN_CHILD', '0'));
const workerCount = Number(option('--workers', 'HARU_SIM_TRAINER_WORKERS', '0'));
const crashAfterMs = Number(option('--crash-after-ms', 'HARU_SIM_TRAINER_CRASH_AFTER_MS', '0'));
const gpuStateDir = process.env.HARU_SIM_GPU_STATE;
const totalSteps = Number(option('--total-steps', 'HARU_SIM_TRAINER_TOTAL_STEPS', '0')) || null;
const progressFile = process.env.HARU_TRAINING_PROGRESS_FILE;
const cudaDevice0 = isTrue(option('--cuda-device-0', 'HARU_SIM_TRAINER_CUDA_DEVICE_0', '0'));

/** Where the memory goes: `HARU_GPU_INDEX`, or with --cuda-device-0 where CUDA's device 0 is. */
function device() {
  if (!cudaDevice0) return { gpuIndex };
  const first = (process.env.CUDA_VISIBLE_DEVICES || '0').split(',')[0].trim();
  if (/^\d+$/.test(first)) return { gpuIndex: Number(first) };
  const inventory = gpuStateDir ? gpuState.readInventory(gpuStateDir) : { gpus: [], mig: null };
  const mig = inventory.mig && inventory.mig.instances.find((m) => m.uuid === first);
  if (mig) return { gpuIndex: mig.gpuIndex, migUuid: mig.uuid };
  const gpu = inventory.gpus.find((g) => g.uuid === first);
  if (gpu) return { gpuIndex: gpu.index };
  process.stderr.write(`trainer: CUDA_VISIBLE_DEVICES=${first} names no device of this host\n`);
  process.exit(1);
}
const held = device();

fs.mkdirSync(checkpointDir, { recursive: true });
const checkpointFile = path.join(checkpointDir, 'checkpoint.json');
const logFile = path.join(checkpointDir, 'trainer.log');

function log(event, fields) {
  const line = JSON.stringify({ at: new Date().toISOString(), event, pid: process.pid, gpuIndex, ...fields });
  fs.appendFileSync(logFile, `${line}\n`);
  process.stdout.write(`${line}\n`);
}

function readStep() {
  try {
    const step = JSON.parse(fs.readFileSync(checkpointFile, 'utf8')).step;
    return Number.isInteger(step) && step >= 0 ? step : 0;
  } catch {
    return 0;
  }
}

function checkpoint(step, final) {
  gpuState.writeJsonAtomic(checkpointFile, { step, final, pid: process.pid, at: new Date().toISOString() });
}

/** A made-up loss that falls with the steps, so a reader can tell one report from the next. */
function report(step) {
  if (progressFile) gpuState.writeJsonAtomic(progressFile, { step, totalSteps, loss: 2 / (1 + step / 100) });
}

let step = readStep();
log('started', { resumedFromStep: step });
if (gpuStateDir) gpuState.setHolding(gpuStateDir, { ...held, usedMiB: vramMiB, label: 'python3' });

if (spawnChild) {
  // Stays in our process group and ignores SIGTERM: only the group's SIGKILL ends it. It writes child.pid
  // itself once its handler is installed, so a reader knows SIGTERM can no longer kill it.
  const script =
    "process.on('SIGTERM', () => {});" +
    `require('fs').writeFileSync(${JSON.stringify(path.join(checkpointDir, 'child.pid'))}, String(process.pid));` +
    'setInterval(() => {}, 1000);';
  const child = spawn(process.execPath, ['-e', script], { stdio: 'ignore' });
  log('child started', { childPid: child.pid });
}

if (isTrue(option('--escape', 'HARU_SIM_TRAINER_ESCAPE', '0'))) {
  // The first child calls setsid (spawn's `detached`), forks the worker again detached and exits at once, so
  // the worker is in no process group or session of ours and its parent is gone (daemon(3)'s double fork).
  const worker =
    `const s = require(${JSON.stringify(require.resolve('./gpu-state.js'))});` +
    `const dir = ${JSON.stringify(gpuStateDir || '')};` +
    `const held = ${JSON.stringify(held)};` +
    `if (dir) s.setHolding(dir, { ...held, usedMiB: ${vramMiB}, label: 'python3' });` +
    `require('fs').writeFileSync(${JSON.stringify(path.join(checkpointDir, 'escaped.pid'))}, String(process.pid));` +
    'setInterval(() => {}, 1000);';
  const first =
    `require('child_process').spawn(process.execPath, ['-e', ${JSON.stringify(worker)}], ` +
    `{ detached: true, stdio: 'ignore' }).unref();`;
  spawn(process.execPath, ['-e', first], { detached: true, stdio: 'ignore' }).unref();
  log('escaped worker started', {});
}

// DataLoader-like workers: default SIGTERM handling (they die), and they leave when the leader goes.
const workers = [];
let stopping = false;
for (let i = 0; i < workerCount; i += 1) {
  const script = `const ppid = process.ppid; setInterval(() => { if (process.ppid !== ppid) process.exit(0); }, 50);`;
  const worker = spawn(process.execPath, ['-e', script], { stdio: 'ignore' });
  workers.push(worker);
  worker.once('exit', (code, signal) => {
    if (finished) return;
    // The next batch cannot come: the leader dies with PyTorch's error, before any final checkpoint.
    log('crashed', { reason: `DataLoader worker (pid ${worker.pid}) is killed by signal: ${signal || code}` });
    process.exit(1);
  });
}
if (workerCount) log('workers started', { workerPids: workers.map((w) => w.pid) });
let finished = false;

const timer = setInterval(() => {
  step += 1;
  checkpoint(step, false);
  report(step);
}, intervalMs);

if (crashAfterMs > 0) {
  setTimeout(() => {
    log('crashed', { reason: 'simulated crash', step });
    process.exit(1);
  }, crashAfterMs);
}

function onTerm(signal) {
  if (ignoreSigterm) {
    log('signal ignored', { signal });
    return;
  }
  if (stopping) return;
  stopping = true;
  log('stopping', { signal, step });
  // With workers, the final checkpoint needs one more batch from them: a moment in which a group-wide SIGTERM
  // has already killed them.
  setTimeout(
    () => {
      clearInterval(timer);
      checkpoint(step, true);
      finished = true;
      for (const worker of workers) worker.kill('SIGTERM');
      if (gpuStateDir) gpuState.setHolding(gpuStateDir, { ...held, usedMiB: 0 });
      log('final checkpoint', { step });
      process.exit(0);
    },
    Math.max(exitDelayMs, workerCount ? 100 : 0),
  );
}
process.on('SIGTERM', () => onTerm('SIGTERM'));
process.on('SIGINT', () => onTerm('SIGINT'));
