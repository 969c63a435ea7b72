/**
 * The host kit's posture, as a process: the supervisor runs as a user of its own holding only the capabilities
 * `runAs` needs (deploy/systemd/haru-supervisor.service grants them with AmbientCapabilities=), and its trainer
 * runs as another user (HARU_TRAINING_RUN_AS, as the host kit's supervisor.env sets it). The trainer must hold no capability, read neither the supervisor's token file nor its
 * environment, and still be stopped; the supervisor keeps its run file where the trainer cannot write. The same
 * supervisor without the capabilities refuses to start, naming what it lacks.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { lookUpUser } from '../../supervisor/run-as';
import { runFilePath } from '../../supervisor/training';
import { freePort } from '../support/ports';
import { describeWithTools, SETPRIV } from '../support/tools';
import { REPO_ROOT, tempDirs, waitFor } from './support';

/** A uid no account has: the supervisor's own user, as `haru` is on a host. */
const SUPERVISOR_UID = 64_123;
const CAPS = 'setuid,setgid,chown,kill';

const nobody = lookUpUser('nobody');
const unavailable =
  process.getuid?.() !== 0
    ? 'not root: a supervisor cannot be started as another user with capabilities'
    : !nobody
      ? 'the host has no user nobody'
      : null;
if (unavailable) console.warn(`skipping the capabilities test: ${unavailable}`);
const describeCapabilities = (title: string, body: () => void) =>
  unavailable ? describe.skip(title, body) : describeWithTools(title, [SETPRIV], body);

const dirs = tempDirs();
const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  dirs.cleanup();
});

/** A host's layout: /var/lib/haru-like state owned by the supervisor's user, its token 0600, a trainer script. */
function host() {
  const root = dirs.make();
  chmodSync(root, 0o755);
  const state = path.join(root, 'state');
  mkdirSync(state);
  chownSync(state, SUPERVISOR_UID, SUPERVISOR_UID);
  const token = 'tok-0123456789abcdef0123456789abcdef';
  const tokenFile = path.join(state, 'supervisor.token');
  writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
  chownSync(tokenFile, SUPERVISOR_UID, SUPERVISOR_UID);
  const checkpointDir = path.join(state, 'ckpt');
  const script = path.join(root, 'train.sh');
  writeFileSync(
    script,
    [
      '#!/bin/sh',
      'd="$HARU_CHECKPOINT_DIR"',
      'grep -E "^(Uid|CapPrm|CapEff|CapAmb|NoNewPrivs):" /proc/self/status > "$d/status"',
      'cat "$TOKEN_FILE" > /dev/null 2> "$d/token-read"',
      'cat /proc/$PPID/environ > /dev/null 2> "$d/environ-read"',
      'touch "$RUN" 2> "$d/run-file-write"',
      // A report for the supervisor to clear at the next start, and one line per run.
      'echo \'{"step": 1}\' > "$HARU_TRAINING_PROGRESS_FILE"',
      'echo run >> "$d/runs"',
      'touch "$d/done"',
      'exec sleep 60',
      '',
    ].join('\n'),
    { mode: 0o755 },
  );
  const config = {
    training: [
      {
        gpuIndex: 1,
        command: [script],
        checkpointDir,
        env: { TOKEN_FILE: tokenFile, RUN: runFilePath(checkpointDir) },
      },
    ],
  };
  return { state, token, tokenFile, checkpointDir, config };
}

/**
 * `haru supervisor` as SUPERVISOR_UID, with `caps` ambient (none: a plain user), its trainers as `runAs` (the
 * host's HARU_TRAINING_RUN_AS; none: as the supervisor's user).
 */
function startSupervisor(
  h: ReturnType<typeof host>,
  port: number,
  caps: string | null,
  runAs: string | null = 'nobody',
) {
  const capArgs = caps
    ? [`--inh-caps=+${caps.split(',').join(',+')}`, `--ambient-caps=+${caps.split(',').join(',+')}`]
    : [];
  const child = spawn(
    'setpriv',
    [
      `--reuid=${SUPERVISOR_UID}`,
      `--regid=${SUPERVISOR_UID}`,
      '--clear-groups',
      ...capArgs,
      '--',
      process.execPath,
      '-r',
      require.resolve('tsx/cjs'),
      path.join(REPO_ROOT, 'supervisor/main.ts'),
    ],
    {
      cwd: h.state,
      env: {
        PATH: process.env.PATH,
        HOME: h.state,
        TMPDIR: h.state,
        PORT: String(port),
        HARU_SUPERVISOR_HOST: '127.0.0.1',
        HARU_SUPERVISOR_TOKEN_FILE: h.tokenFile,
        HARU_SUPERVISOR_CONFIG: JSON.stringify(h.config),
        // No delegated cgroup for a test's process: tracking by process group is said to be enough.
        HARU_TRAINING_ALLOW_PGROUP: '1',
        // The host's policy, as the host kit's supervisor.env sets it (haru-trainer there): every slot as nobody.
        ...(runAs ? { HARU_TRAINING_RUN_AS: runAs } : {}),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  children.push(child);
  let output = '';
  child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, exited, output: () => output };
}

const call = async (port: number, token: string, route: string, body?: unknown) => {
  const res = await fetch(`http://127.0.0.1:${port}/v1/${route}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

/** Waits until the supervisor on `port` answers its health check. */
const listening = (port: number) =>
  waitFor('the supervisor to listen', () =>
    fetch(`http://127.0.0.1:${port}/healthz`).then(
      (r) => r.ok,
      () => false,
    ),
  );

/** Stops GPU 1's training and waits for it to be idle; its status then. */
async function stop(port: number, token: string) {
  await call(port, token, 'training/stop', { gpuIndex: 1, graceMs: 5_000 });
  return waitFor('the trainer to stop', async () => {
    const { body } = await call(port, token, 'status');
    const [run] = body.training as { state: string; lastExit: { signal: string | null } | null }[];
    return run!.state === 'idle' ? run! : false;
  });
}

describeCapabilities('a supervisor holding capabilities instead of root', () => {
  it('runs its trainer as another user with no capability, out of reach of its token, and stops it', async () => {
    const h = host();
    const port = await freePort();
    const sup = startSupervisor(h, port, CAPS);
    await listening(port);
    expect(readFileSync(`/proc/${sup.child.pid}/status`, 'utf8')).toMatch(
      new RegExp(`^Uid:\\s+${SUPERVISOR_UID}\\s`, 'm'),
    );

    expect((await call(port, h.token, 'training/start', { gpuIndex: 1 })).body).toMatchObject({ accepted: true });
    const ckpt = (name: string) => readFileSync(path.join(h.checkpointDir, name), 'utf8');
    await waitFor('the trainer to look around', () => existsSync(path.join(h.checkpointDir, 'done')));
    const status = ckpt('status');
    expect(status).toMatch(new RegExp(`^Uid:\\s+${nobody!.uid}\\s`, 'm'));
    // setpriv handed on no capability (CAP_SETUID would let it become anyone) and set no_new_privs.
    expect(status).toMatch(/^CapPrm:\s+0+$/m);
    expect(status).toMatch(/^CapEff:\s+0+$/m);
    expect(status).toMatch(/^CapAmb:\s+0+$/m);
    expect(status).toMatch(/^NoNewPrivs:\s+1$/m);
    expect(ckpt('token-read')).toMatch(/Permission denied/);
    expect(ckpt('environ-read')).toMatch(/Permission denied/);
    // The checkpoints are the trainer's; the run file beside them is the supervisor's, and it could write it.
    expect(statSync(h.checkpointDir)).toMatchObject({ uid: nobody!.uid });
    expect(ckpt('run-file-write')).toMatch(/Permission denied/);
    expect(lstatSync(runFilePath(h.checkpointDir))).toMatchObject({ uid: SUPERVISOR_UID });
    expect(sup.output()).not.toMatch(/training run file not written/);

    // CAP_KILL: the trainer, another user's process, is stopped.
    expect((await stop(port, h.token)).lastExit).toMatchObject({ signal: 'SIGTERM' });
    // And started again on the same slot: the last run's progress report, in the trainer's directory, is cleared
    // by a supervisor that cannot unlink there without taking the directory back for that moment.
    expect((await call(port, h.token, 'training/start', { gpuIndex: 1 })).body).toMatchObject({ accepted: true });
    await waitFor('a second run', () => ckpt('runs').split('\n').filter(Boolean).length === 2);
    expect(statSync(h.checkpointDir)).toMatchObject({ uid: nobody!.uid });
    await stop(port, h.token);
    sup.child.kill('SIGTERM');
    await sup.exited;
  });

  it('drops its capabilities for a trainer without runAs, which runs as the supervisor’s user', async () => {
    const h = host();
    const port = await freePort();
    const sup = startSupervisor(h, port, CAPS, null);
    await listening(port);
    expect((await call(port, h.token, 'training/start', { gpuIndex: 1 })).body).toMatchObject({ accepted: true });
    await waitFor('the trainer to look around', () => existsSync(path.join(h.checkpointDir, 'done')));
    const status = readFileSync(path.join(h.checkpointDir, 'status'), 'utf8');
    expect(status).toMatch(new RegExp(`^Uid:\\s+${SUPERVISOR_UID}\\s`, 'm'));
    // Ambient capabilities survive exec: without setpriv in between it would hold CAP_SETUID, and be root at will.
    expect(status).toMatch(/^CapPrm:\s+0+$/m);
    expect(status).toMatch(/^CapEff:\s+0+$/m);
    expect(status).toMatch(/^CapAmb:\s+0+$/m);
    await stop(port, h.token);
    sup.child.kill('SIGTERM');
    await sup.exited;
  });

  it('refuses to start as a plain user, naming the capabilities it lacks', async () => {
    const h = host();
    const sup = startSupervisor(h, await freePort(), null);
    expect(await sup.exited).not.toBe(0);
    expect(sup.output()).toMatch(
      /training\[0\]\.runAs: running trainers as nobody needs a supervisor running as root or holding CAP_CHOWN, CAP_KILL, CAP_SETGID, CAP_SETUID \(missing CAP_CHOWN, CAP_KILL, CAP_SETGID, CAP_SETUID;/,
    );
  });
});
