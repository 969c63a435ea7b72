/**
 * The supervisor as a process: where it listens, how it refuses bad config, and how its own SIGTERM stops
 * every training run before it exits.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { isAlive, writeInventory } from '../../sim/gpu-state';
import { type RunningSupervisor, startSupervisor } from '../../supervisor/main';
import { checkpointStep, FAKE_NVIDIA_SMI, REPO_ROOT, tempDirs, TRAINER, trainerEvents, waitFor } from './support';

const dirs = tempDirs();
const running: RunningSupervisor[] = [];
const children: ChildProcess[] = [];
afterAll(async () => {
  await Promise.all(running.map((s) => s.shutdown(0)));
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  dirs.cleanup();
});

const CONFIG = JSON.stringify({ inference: [{ gpuIndex: 0, models: [{ name: 'm', port: 1 }] }] });

/** Whether something accepts TCP connections on host:port. */
function connects(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

const publicIPv4 = Object.values(os.networkInterfaces())
  .flat()
  .find((i) => i && i.family === 'IPv4' && !i.internal)?.address;

/**
 * Spawns `node -r tsx/cjs supervisor/main.ts` with `env`; collects its output. None of these is a test of
 * tracking (the in-process ones below are): runs may be tracked by process group on a test machine that has no
 * cgroup to give them.
 */
function spawnSupervisor(env: NodeJS.ProcessEnv) {
  const child = spawn(
    process.execPath,
    ['-r', require.resolve('tsx/cjs'), path.join(REPO_ROOT, 'supervisor/main.ts')],
    {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, HARU_TRAINING_ALLOW_PGROUP: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, exited, stdout: () => stdout, stderr: () => stderr };
}

describe('supervisor process', () => {
  it('listens on 127.0.0.1 only, with a loud warning, when no token is set', async () => {
    const lines: string[] = [];
    const banner: string[] = [];
    const sup = await startSupervisor(
      { HARU_SUPERVISOR_CONFIG: CONFIG, PORT: '0' },
      { write: (line) => lines.push(line), warn: (line) => banner.push(line), trainingOutput: 'ignore' },
    );
    expect(banner.join('')).toMatch(/WARNING: HARU_SUPERVISOR_TOKEN is not set.*UNAUTHENTICATED.*127\.0\.0\.1 only/);
    running.push(sup);
    expect(sup.server.address()).toMatchObject({ address: '127.0.0.1' });
    expect(await connects('127.0.0.1', sup.port)).toBe(true);
    if (publicIPv4) expect(await connects(publicIPv4, sup.port)).toBe(false);
    const warning = lines.map((l) => JSON.parse(l) as { level: string; msg: string }).find((l) => l.level === 'warn');
    expect(warning?.msg).toMatch(/HARU_SUPERVISOR_TOKEN is not set/);
    const res = await fetch(`http://127.0.0.1:${sup.port}/v1/status`);
    expect(res.status).toBe(200); // unauthenticated mode: loopback callers need no token
  });

  it('listens on every interface when a token is set', async () => {
    const sup = await startSupervisor(
      { HARU_SUPERVISOR_CONFIG: CONFIG, PORT: '0', HARU_SUPERVISOR_TOKEN: 'secret-token' },
      { write: () => {}, warn: () => {}, trainingOutput: 'ignore' },
    );
    running.push(sup);
    expect(sup.server.address()).toMatchObject({ address: '0.0.0.0' });
    if (publicIPv4) expect(await connects(publicIPv4, sup.port)).toBe(true);
    expect((await fetch(`http://127.0.0.1:${sup.port}/v1/status`)).status).toBe(401);
  });

  it('refuses at start a vLLM apiKey file that group or others may read, naming the model, the file and its mode', async () => {
    const keyFile = path.join(dirs.make(), 'vllm.key');
    writeFileSync(keyFile, 'vllm-key\n');
    chmodSync(keyFile, 0o640);
    const config = JSON.stringify({
      inference: [{ gpuIndex: 0, models: [{ name: 'm', port: 1, apiKey: { file: keyFile } }] }],
    });
    await expect(
      startSupervisor({ HARU_SUPERVISOR_CONFIG: config, PORT: '0' }, { write: () => {}, warn: () => {} }),
    ).rejects.toThrow(new RegExp(`^model m: .*${keyFile} is open to group or others \\(mode 0640\\)`));
  });

  describe('without cgroup tracking', () => {
    const reason = 'cannot create a cgroup under its own /sys/fs/cgroup (EROFS)';
    const tracking = { kind: 'process-group' as const, reason };
    const trainingConfig = (dir: string) =>
      JSON.stringify({
        training: [{ gpuIndex: 0, command: [process.execPath, TRAINER, '--interval-ms', '30'], checkpointDir: dir }],
      });
    const start = (port: number) =>
      fetch(`http://127.0.0.1:${port}/v1/training/start`, { method: 'POST' }).then(
        (r) => r.json() as Promise<{ accepted: boolean; errors: { target: string; message: string }[] }>,
      );
    const trainingStatus = async (port: number) =>
      ((await (await fetch(`http://127.0.0.1:${port}/v1/status`)).json()) as { training: Record<string, unknown>[] })
        .training[0]!;

    it('refuses to start training, saying why in the answer and in its training status', async () => {
      const ckpt = path.join(dirs.make(), 'ckpt');
      const sup = await startSupervisor(
        { HARU_SUPERVISOR_CONFIG: trainingConfig(ckpt), PORT: '0' },
        { write: () => {}, warn: () => {}, trainingOutput: 'ignore', tracking },
      );
      running.push(sup);
      const answer = await start(sup.port);
      expect(answer.accepted).toBe(false);
      expect(answer.errors).toEqual([
        {
          target: 'training/gpu0',
          message: expect.stringContaining(`no cgroup to track its processes in (${reason})`),
        },
      ]);
      expect(answer.errors[0]!.message).toContain('HARU_TRAINING_ALLOW_PGROUP=1');
      const status = await trainingStatus(sup.port);
      expect(status).toMatchObject({
        state: 'idle',
        pids: [],
        refused: expect.stringContaining('training refused: no cgroup'),
        tracking: { kind: 'process-group', detail: reason },
      });
      expect(checkpointStep(ckpt)).toBe(-1); // no trainer ever ran: no checkpoint
    });

    it('trains tracked by process group when HARU_TRAINING_ALLOW_PGROUP=1 says so', async () => {
      const ckpt = path.join(dirs.make(), 'ckpt');
      const sup = await startSupervisor(
        { HARU_SUPERVISOR_CONFIG: trainingConfig(ckpt), PORT: '0', HARU_TRAINING_ALLOW_PGROUP: '1' },
        { write: () => {}, warn: () => {}, trainingOutput: 'ignore', tracking },
      );
      running.push(sup);
      expect(await start(sup.port)).toMatchObject({ accepted: true, errors: [] });
      await waitFor('a checkpoint', () => checkpointStep(ckpt) > 0);
      expect(await trainingStatus(sup.port)).toMatchObject({
        state: 'running',
        refused: null,
        tracking: { kind: 'process-group', detail: reason },
      });
      await sup.training.stopAll(5_000);
    });

    it('refuses a HARU_TRAINING_ALLOW_PGROUP other than 0 or 1 at start', async () => {
      await expect(
        startSupervisor(
          { HARU_SUPERVISOR_CONFIG: CONFIG, PORT: '0', HARU_TRAINING_ALLOW_PGROUP: 'yes' },
          { write: () => {}, warn: () => {} },
        ),
      ).rejects.toThrow(/HARU_TRAINING_ALLOW_PGROUP/);
    });
  });

  it('reads the GPUs as a trainer ends, and answers a reading asked for since that end without another run', async () => {
    const dir = dirs.make();
    const gpuState = path.join(dir, 'gpu');
    writeInventory(gpuState, {
      gpus: [{ index: 0, uuid: 'GPU-00000000-0000-4000-8000-000000000000', name: 'NVIDIA H100', totalMiB: 81559 }],
      mig: null,
      baselineMiB: 4,
      fault: null,
    });
    // nvidia-smi as the supervisor runs it, counting its runs.
    const runs = path.join(dir, 'runs');
    const smi = path.join(dir, 'nvidia-smi');
    writeFileSync(
      smi,
      `#!/bin/sh\necho run >> '${runs}'\nHARU_SIM_GPU_STATE='${gpuState}' exec '${FAKE_NVIDIA_SMI}' "$@"\n`,
    );
    chmodSync(smi, 0o755);
    const count = () => (existsSync(runs) ? readFileSync(runs, 'utf8').split('\n').filter(Boolean).length : 0);
    const ckpt = path.join(dir, 'ckpt');
    const config = {
      training: [
        {
          gpuIndex: 0,
          command: [process.execPath, TRAINER, '--interval-ms', '30', '--vram-mib', '20000'],
          checkpointDir: ckpt,
          env: { HARU_SIM_GPU_STATE: gpuState },
        },
      ],
    };
    const sup = await startSupervisor(
      { HARU_SUPERVISOR_CONFIG: JSON.stringify(config), PORT: '0', HARU_GPU_SMI: smi, HARU_TRAINING_ALLOW_PGROUP: '1' },
      {
        write: () => {},
        warn: () => {},
        trainingOutput: 'ignore',
        tracking: { kind: 'process-group', reason: 'test' },
      },
    );
    running.push(sup);
    const get = async (route: string) => (await fetch(`http://127.0.0.1:${sup.port}${route}`)).json();
    await fetch(`http://127.0.0.1:${sup.port}/v1/training/start`, { method: 'POST' });
    await waitFor('a checkpoint', () => checkpointStep(ckpt) > 0);
    const before = count();
    await fetch(`http://127.0.0.1:${sup.port}/v1/training/stop`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"graceMs":5000}',
    });
    const ended = await waitFor('training idle', async () => {
      const t = ((await get('/v1/status')) as { training: { state: string; lastExit: { at: string } | null }[] })
        .training[0]!;
      return t.state === 'idle' && t.lastExit?.at;
    });
    // The supervisor ran the tool as the trainer ended (two queries: per GPU and per process), asked by no one.
    await waitFor('a reading started at the trainer’s end', () => count() - before >= 2);
    // That run answers a request for a reading since the end, shown as taken then.
    const reading = (await get(`/v1/gpu/memory?since=${encodeURIComponent(ended)}`)) as {
      at: string;
      gpus: { usedMiB: number; processes: unknown[] }[];
    };
    expect(count() - before).toBe(2);
    expect(Date.parse(reading.at)).toBeGreaterThanOrEqual(Date.parse(ended));
    expect(reading.gpus[0]).toMatchObject({ usedMiB: 4, processes: [] });
    // Without `since`, a run of its own.
    await get('/v1/gpu/memory');
    expect(count() - before).toBe(4);
    const bad = await fetch(`http://127.0.0.1:${sup.port}/v1/gpu/memory?since=yesterday`);
    expect(bad.status).toBe(400);
  });

  it('exits non-zero listing every problem of a bad config', async () => {
    const bad = JSON.stringify({
      inference: [{ gpuIndex: 0, models: [{ name: 'a', port: 70000 }], sleepLevel: 5 }],
      training: [{ gpuIndex: 0, command: [], checkpointDir: '' }],
      extra: 1,
    });
    const sup = spawnSupervisor({ HARU_SUPERVISOR_CONFIG: bad, PORT: '0' });
    expect(await sup.exited).toEqual({ code: 2, signal: null });
    for (const problem of [
      'inference.0.models.0.port',
      'inference.0.sleepLevel',
      'training.0.command',
      'training.0.checkpointDir',
      'Unrecognized key: "extra"',
    ]) {
      expect(sup.stderr()).toContain(problem);
    }
    expect(sup.stderr()).not.toMatch(/\n\s+at /); // no stack trace
  });

  it('refuses at start a MIG instance the host does not have, naming the field', async () => {
    const gpuState = path.join(dirs.make(), 'gpu');
    writeInventory(gpuState, {
      gpus: [
        { index: 0, uuid: `GPU-${'0'.repeat(8)}-0000-4000-8000-${'0'.repeat(12)}`, name: 'H100', totalMiB: 81_559 },
      ],
      mig: null,
      baselineMiB: 4,
      fault: null,
    });
    const missing = 'MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f';
    const config = JSON.stringify({
      training: [{ gpuIndex: 0, mig: missing, command: ['true'], checkpointDir: dirs.make() }],
    });
    const sup = spawnSupervisor({
      HARU_SUPERVISOR_CONFIG: config,
      PORT: '0',
      HARU_GPU_SMI: FAKE_NVIDIA_SMI,
      HARU_SIM_GPU_STATE: gpuState,
    });
    expect(await sup.exited).toEqual({ code: 2, signal: null });
    expect(sup.stderr()).toContain(`training[0].mig: ${missing} is not a MIG device of this host`);
  });

  it('takes its token from HARU_SUPERVISOR_TOKEN_FILE, so a trainer finds it nowhere in its environ', async () => {
    const dir = dirs.make();
    const token = 'tok-from-file-9f2c';
    const tokenFile = path.join(dir, 'token');
    writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
    const ckpt = path.join(dir, 'ckpt');
    // The trainer reads its parent's (the supervisor's) environment, as any same-user process can.
    const script = 'tr "\\0" "\\n" < /proc/$PPID/environ > "$HARU_CHECKPOINT_DIR/parent.env"; exec sleep 60';
    const config = { training: [{ gpuIndex: 0, command: ['/bin/sh', '-c', script], checkpointDir: ckpt }] };
    const sup = spawnSupervisor({
      HARU_SUPERVISOR_CONFIG: JSON.stringify(config),
      PORT: '0',
      HARU_SUPERVISOR_TOKEN_FILE: tokenFile,
      HARU_SUPERVISOR_HOST: '127.0.0.1',
    });
    const port = await waitFor('the supervisor to listen', () => /"port":(\d+)/.exec(sup.stdout())?.[1]);
    const url = `http://127.0.0.1:${port}/v1/training/start`;
    expect((await fetch(url, { method: 'POST' })).status).toBe(401);
    const start = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
    expect(start.status).toBe(200);
    const parentEnv = await waitFor('the trainer to read it', () => {
      try {
        return readFileSync(path.join(ckpt, 'parent.env'), 'utf8');
      } catch {
        return false;
      }
    });
    expect(parentEnv).toContain(`HARU_SUPERVISOR_TOKEN_FILE=${tokenFile}`); // it could read the environ
    expect(parentEnv).not.toContain(token);
    sup.child.kill('SIGTERM');
    expect(await sup.exited).toEqual({ code: 0, signal: null });
  });

  it('refuses at start a HARU_SUPERVISOR_TOKEN_FILE that group or others may read, naming the file and its mode', async () => {
    const tokenFile = path.join(dirs.make(), 'token');
    writeFileSync(tokenFile, 'tok-world-readable\n');
    chmodSync(tokenFile, 0o644);
    const sup = spawnSupervisor({ HARU_SUPERVISOR_CONFIG: CONFIG, PORT: '0', HARU_SUPERVISOR_TOKEN_FILE: tokenFile });
    expect(await sup.exited).toEqual({ code: 2, signal: null });
    expect(sup.stderr()).toContain(
      `HARU_SUPERVISOR_TOKEN_FILE: ${tokenFile} is open to group or others (mode 0644); chmod 600 it`,
    );
  });

  it('stops every training run within the shutdown grace on SIGTERM, then exits 0', async () => {
    const dir = dirs.make();
    const ckpt = (gpu: number) => path.join(dir, `ckpt${gpu}`);
    const config = {
      training: [
        { gpuIndex: 0, command: [process.execPath, TRAINER, '--interval-ms', '30'], checkpointDir: ckpt(0) },
        {
          gpuIndex: 1,
          command: [process.execPath, TRAINER, '--interval-ms', '30', '--ignore-sigterm'],
          checkpointDir: ckpt(1),
        },
      ],
    };
    const sup = spawnSupervisor({
      HARU_SUPERVISOR_CONFIG: JSON.stringify(config),
      PORT: '0',
      HARU_SHUTDOWN_GRACE_MS: '800',
    });
    const port = await waitFor('the supervisor to listen', () => /"port":(\d+)/.exec(sup.stdout())?.[1]);
    const start = await fetch(`http://127.0.0.1:${port}/v1/training/start`, { method: 'POST' });
    expect(await start.json()).toEqual({ accepted: true, gpuIndexes: [0, 1], errors: [] });
    await waitFor('both trainers checkpointing', () => checkpointStep(ckpt(0)) > 0 && checkpointStep(ckpt(1)) > 0);
    const pids = [0, 1].map((gpu) => trainerEvents(ckpt(gpu)).find((e) => e.event === 'started')!.pid);

    sup.child.kill('SIGTERM');
    expect(await sup.exited).toEqual({ code: 0, signal: null });
    expect(pids.map(isAlive)).toEqual([false, false]);
    const final = JSON.parse(readFileSync(path.join(ckpt(0), 'checkpoint.json'), 'utf8')) as { final: boolean };
    expect(final.final).toBe(true); // the cooperative trainer saved on SIGTERM
    expect(trainerEvents(ckpt(1)).some((e) => e.event === 'signal ignored')).toBe(true); // the other was killed
    const exits = sup
      .stdout()
      .split('\n')
      .filter((l) => l.includes('"training exited"'))
      .map((l) => JSON.parse(l) as { gpuIndex: number; code: number | null; signal: string | null })
      .sort((a, b) => a.gpuIndex - b.gpuIndex);
    expect(exits.map((e) => [e.gpuIndex, e.code, e.signal])).toEqual([
      [0, 0, null],
      [1, null, 'SIGKILL'],
    ]);
  });
});
