/**
 * The supervisor in a container: a real PID namespace (`unshare --pid --mount`), the supervisor as its first
 * process, its trainer inside, and the fake nvidia-smi printing host pids as the NVIDIA driver does. With the
 * host's /proc mounted in (HARU_HOST_PROC) the pids are mapped back through NSpid; without it none is matched
 * and the verdict says which proof stands instead.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import { judgeGpu } from '../../core/gpu-release';
import { gpuMemoryReportSchema, supervisorStatusSchema } from '../../schemas/supervisor';
import { isAlive, writeInventory } from '../../sim/gpu-state';
import { removeCgroup } from '../../supervisor/cgroup';
import { parseNsPid } from '../../supervisor/gpu/pid-namespace';
import { runFilePath } from '../../supervisor/training';
import { FAKE_NVIDIA_SMI, REPO_ROOT, tempDirs, TRAINER, waitFor } from './support';

const dirs = tempDirs();
const children: ChildProcess[] = [];
/** Host pids of the namespaces' trainers: the namespace is gone once they are. */
const trainers: number[] = [];
const runCgroups: string[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) child.kill('SIGKILL'); // --kill-child: the namespace dies with it
  const pids = trainers.splice(0);
  await waitFor('the namespaces gone', () => pids.every((pid) => !isAlive(pid)));
  for (const dir of runCgroups.splice(0)) removeCgroup(dir); // the killed supervisor left them, emptied
  dirs.cleanup();
});

/** Bind the host's /proc at $0, give the namespace its own /proc, then run the command as its first process. */
const ENTER = 'mount --bind /proc "$0" && mount -t proc proc /proc && exec "$@"';

/** Why this machine cannot make a PID and mount namespace here, or null. */
function namespacesUnavailable(): string | null {
  const hostProc = path.join(dirs.make('haru-ns-probe-'), 'proc');
  mkdirSync(hostProc);
  const probe = spawnSync(
    'unshare',
    ['--pid', '--mount', '--fork', '--propagation', 'private', 'sh', '-c', ENTER, hostProc, 'true'],
    { encoding: 'utf8' },
  );
  dirs.cleanup();
  if (probe.error) return `unshare is not installed (util-linux): ${probe.error.message}`;
  if (probe.status !== 0) return `unshare --pid --mount needs CAP_SYS_ADMIN: ${probe.stderr.trim()}`;
  return null;
}

const unavailable = namespacesUnavailable();
if (unavailable) console.warn(`skipping PID-namespace tests: ${unavailable}`);
const describeNs = unavailable ? describe.skip : describe;

/** The host pid of the process of namespace `ns` that is `pid` there. */
function hostPidOf(pid: number, ns: string): number | undefined {
  for (const name of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      if (readlinkSync(`/proc/${name}/ns/pid`) !== ns) continue;
      const nsPids = parseNsPid(readFileSync(`/proc/${name}/status`, 'utf8'));
      if (nsPids?.at(-1) === pid) return nsPids[0];
    } catch {
      // exited meanwhile
    }
  }
  return undefined;
}

async function startInNamespace(opts: { mapped: boolean }) {
  const dir = dirs.make('haru-ns-');
  const hostProc = path.join(dir, 'host-proc');
  mkdirSync(hostProc);
  const gpuState = path.join(dir, 'gpu');
  writeInventory(gpuState, {
    gpus: [0, 1].map((index) => ({
      index,
      uuid: `GPU-${String(index).repeat(8)}-0000-4000-8000-${'0'.repeat(12)}`,
      name: 'H100',
      totalMiB: 81_559,
    })),
    mig: null,
    baselineMiB: 4,
    fault: null,
    hostProc,
  });
  const config = {
    inference: [],
    training: [
      {
        gpuIndex: 1,
        command: [process.execPath, TRAINER, '--interval-ms', '30'],
        checkpointDir: path.join(dir, 'ckpt'),
        env: { HARU_SIM_GPU_STATE: gpuState },
      },
    ],
  };
  const child = spawn(
    'unshare',
    [
      '--pid',
      '--mount',
      '--fork',
      '--kill-child',
      '--propagation',
      'private',
      'sh',
      '-c',
      ENTER,
      hostProc,
      process.execPath,
      '-r',
      require.resolve('tsx/cjs'),
      path.join(REPO_ROOT, 'supervisor/main.ts'),
    ],
    {
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        PORT: '0',
        HARU_SUPERVISOR_CONFIG: JSON.stringify(config),
        HARU_GPU_SMI: FAKE_NVIDIA_SMI,
        HARU_SIM_GPU_STATE: gpuState,
        // Not a test of tracking: train on a test machine without a cgroup to give runs too.
        HARU_TRAINING_ALLOW_PGROUP: '1',
        ...(opts.mapped ? { HARU_HOST_PROC: hostProc } : {}),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  children.push(child);
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const port = await waitFor(
    'the supervisor listening',
    () => /"msg":"supervisor listening".*?"port":(\d+)/.exec(out)?.[1] ?? (child.exitCode !== null && 'exited'),
  );
  if (port === 'exited') throw new Error(`supervisor exited: ${out}`);
  const base = `http://127.0.0.1:${port}`;
  const get = async (p: string) => (await fetch(`${base}${p}`)).json() as Promise<unknown>;
  await fetch(`${base}/v1/training/start`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ gpuIndex: 1 }),
  });
  const trainerPid = await waitFor('the trainer running', async () => {
    const status = supervisorStatusSchema.parse(await get('/v1/status'));
    return status.training[0]?.state === 'running' && status.training[0].pids[0];
  });
  const memory = await waitFor('the trainer holding memory', async () => {
    const report = gpuMemoryReportSchema.parse(await get('/v1/gpu/memory'));
    const gpu = report.gpus.find((g) => g.index === 1)!;
    // nvidia-smi's GPU total and its process list are two reads: wait until both show the trainer's memory.
    const held = gpu.processes.reduce((sum, p) => sum + (p.usedMiB ?? 0), 0);
    return gpu.processes.length > 0 && (gpu.usedMiB ?? 0) >= held && gpu;
  });
  const { cgroup } = JSON.parse(readFileSync(runFilePath(config.training[0]!.checkpointDir), 'utf8')) as {
    cgroup: string | null;
  };
  if (cgroup) runCgroups.push(cgroup);
  const hostPid = hostPidOf(trainerPid, namespaceOf(child.pid!));
  if (hostPid) trainers.push(hostPid);
  return { trainerPid, memory, hostPid };
}

/** The PID namespace `unshare --fork` (pid `unsharePid`) made: that of its child, the namespace's first process. */
function namespaceOf(unsharePid: number): string {
  for (const name of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === unsharePid) {
        return readlinkSync(`/proc/${name}/ns/pid`);
      }
    } catch {
      // exited meanwhile
    }
  }
  throw new Error(`unshare (pid ${unsharePid}) has no child`);
}

describeNs('a supervisor in its own PID namespace', () => {
  it("maps nvidia-smi's host pids into its own through the host's /proc (NSpid)", async () => {
    const { trainerPid, memory, hostPid } = await startInNamespace({ mapped: true });
    expect(hostPid).toBeDefined();
    expect(hostPid).not.toBe(trainerPid); // the fake printed the host's number, as the driver does
    expect(memory.pidSpace).toBe('mapped');
    expect(memory.processes).toEqual([{ pid: trainerPid, usedMiB: 20_000 }]);
    expect(judgeGpu(memory, [trainerPid], 0.1).problems).toContain(
      `GPU 1: trainer pid ${trainerPid} still holds 20000 MiB`,
    );
  });

  it('without the host /proc, matches no pid and says which proof stands instead', async () => {
    const { trainerPid, memory, hostPid } = await startInNamespace({ mapped: false });
    expect(memory.pidSpace).toBe('unmapped');
    expect(memory.processes).toEqual([{ pid: hostPid, usedMiB: 20_000, foreign: true }]);
    const verdict = judgeGpu(memory, [trainerPid], 0.1);
    expect(verdict.problems.join('; ')).not.toMatch(/trainer pid/);
    expect(verdict.problems).toContain(
      `GPU 1: 20004 MiB held besides its vLLM servers (max 8155 MiB, 10% of 81559) (held by host pid ${hostPid} 20000 MiB)`,
    );
    expect(verdict.seen.proof).toMatch(/cannot map them \(no host \/proc\).*stop proof stands instead/);
  });
});
