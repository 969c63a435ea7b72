import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SecretNotSetError, SkyCommandError, STDERR_CAP_CHARS } from './errors';
import { createSpawnExec } from './exec';
import { createSkyCli, skyArgs, type SkyCli, skyProcessEnv } from './sky';

const SIM_BIN = path.resolve(__dirname, '../sim/bin');
const TOKEN = 'tok-3f9a';

interface Call {
  argv: string[];
  secrets?: Record<string, string>;
  yaml?: string;
}

/** A fake `sky` on PATH with its own state dir; `calls()` is what it recorded. */
function fakeSky(opts: { statusOutput?: 'table' | 'json'; env?: Record<string, string> } = {}) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-fake-sky-'));
  const state = path.join(dir, 'state');
  const tmpDir = path.join(dir, 'tmp');
  mkdirSync(tmpDir);
  const sky: SkyCli = createSkyCli({
    exec: createSpawnExec({ killGraceMs: 500 }),
    env: { PATH: `${SIM_BIN}:${process.env.PATH}`, HOME: dir, FAKE_SKY_STATE_DIR: state, ...opts.env },
    statusOutput: opts.statusOutput,
    tmpDir,
  });
  return {
    sky,
    state,
    tmpDir,
    calls: (): Call[] =>
      existsSync(path.join(state, 'calls.jsonl'))
        ? readFileSync(path.join(state, 'calls.jsonl'), 'utf8')
            .split('\n')
            .filter(Boolean)
            .map((l) => JSON.parse(l) as Call)
        : [],
    script: (script: Record<string, unknown>) => {
      mkdirSync(state, { recursive: true });
      writeFileSync(path.join(state, 'script.json'), JSON.stringify(script));
    },
    clusters: () =>
      JSON.parse(readFileSync(path.join(state, 'clusters.json'), 'utf8')) as Record<string, { pid: number | null }>,
    log: (name: string) => readFileSync(path.join(state, `${name}.log`), 'utf8'),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

const TASK = [
  'name: haru-t-east',
  'resources:',
  '  ports: [8701]',
  'envs:',
  '  HARU_DOMAIN: "east"',
  'run: |',
  '  echo "domain $HARU_DOMAIN token length ${#HARU_SUPERVISOR_TOKEN}"',
  '  exec sleep 600',
  '',
].join('\n');
const SERVICE = `service:\n  ports: 8701\n  readiness_probe:\n    path: /healthz\n  replicas: 1\n${TASK}`;

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function eventually<T>(what: string, check: () => T | null | undefined | false, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

let fake: ReturnType<typeof fakeSky>;
beforeEach(() => {
  fake = fakeSky();
});
afterEach(async () => {
  // Down whatever a test left up so no `sleep` outlives it.
  for (const name of Object.keys(existsSync(path.join(fake.state, 'clusters.json')) ? fake.clusters() : {})) {
    await fake.sky.down(name).catch(() => undefined);
  }
  await fake.sky.serveDown('haru-t-east').catch(() => undefined);
  fake.cleanup();
});

describe('the environment of sky processes', () => {
  it("keeps what sky needs and drops Haru's secrets, every supervisor token variable included", () => {
    const env = skyProcessEnv({
      PATH: '/bin',
      AWS_PROFILE: 'prod',
      HARU_API_TOKEN: 'a',
      DATABASE_URL: 'postgres://x',
      HARU_LISTEN_DATABASE_URL: 'postgres://y',
      HARU_SUPERVISOR_TOKEN: 's',
      HARU_SUPERVISOR_TOKEN_FILE: '/run/s',
      HARU_SUPERVISOR_TOKEN_AWS_USE1: 'per-domain',
      HARU_SECRET_EAST_TOKEN: 'per-domain, as layouts name it',
      HARU_SECRET_UPSTREAM_KEY: 'an upstreamAuth key',
    });
    expect(env).toEqual({ PATH: '/bin', AWS_PROFILE: 'prod' });
  });
});

describe('argv', () => {
  it('builds every command the way the real CLI takes it', () => {
    expect(skyArgs.launch('haru-p-a', '/tmp/x.yaml', ['HARU_SUPERVISOR_TOKEN'])).toEqual([
      'launch',
      '--cluster',
      'haru-p-a',
      '--yes',
      '--detach-run',
      '--secret',
      'HARU_SUPERVISOR_TOKEN',
      '/tmp/x.yaml',
    ]);
    expect(skyArgs.status('haru-p-a')).toEqual(['status', '--refresh', 'haru-p-a']);
    expect(skyArgs.status('haru-p-a', { refresh: false, json: true })).toEqual(['status', '-o', 'json', 'haru-p-a']);
    expect(skyArgs.stop('haru-p-a')).toEqual(['stop', 'haru-p-a', '--yes']);
    expect(skyArgs.down('haru-p-a')).toEqual(['down', 'haru-p-a', '--yes']);
    expect(skyArgs.serveUp('haru-p-a', '/tmp/s.yaml', ['T'])).toEqual([
      'serve',
      'up',
      '--service-name',
      'haru-p-a',
      '--yes',
      '--secret',
      'T',
      '/tmp/s.yaml',
    ]);
    expect(skyArgs.serveStatus('haru-p-a')).toEqual(['serve', 'status', 'haru-p-a']);
    expect(skyArgs.endpoint('haru-p-a', 8701)).toEqual(['status', '--endpoint', '8701', 'haru-p-a']);
    expect(skyArgs.serveEndpoint('haru-p-a')).toEqual(['serve', 'status', '--endpoint', 'haru-p-a']);
    expect(skyArgs.serveDown('haru-p-a')).toEqual(['serve', 'down', 'haru-p-a', '--yes']);
  });

  it('runs exactly those argv against the CLI on PATH', async () => {
    await fake.sky.launch({ name: 'haru-t-east', yaml: TASK, secrets: { HARU_SUPERVISOR_TOKEN: TOKEN } });
    await fake.sky.status('haru-t-east');
    await fake.sky.stop('haru-t-east');
    await fake.sky.down('haru-t-east');
    const argv = fake.calls().map((c) => c.argv);
    expect(argv[0]!.slice(0, -1)).toEqual(skyArgs.launch('haru-t-east', '', ['HARU_SUPERVISOR_TOKEN']).slice(0, -1));
    expect(argv.slice(1)).toEqual([
      skyArgs.status('haru-t-east'),
      skyArgs.stop('haru-t-east'),
      skyArgs.down('haru-t-east'),
    ]);
  });
});

describe('launch', () => {
  it('hands the secret to the host through the environment only: not on argv, not in the YAML, and the YAML file is gone after', async () => {
    await fake.sky.launch({ name: 'haru-t-east', yaml: TASK, secrets: { HARU_SUPERVISOR_TOKEN: TOKEN } });
    const [call] = fake.calls();
    expect(call!.secrets).toEqual({ HARU_SUPERVISOR_TOKEN: TOKEN });
    expect(call!.argv.join(' ')).not.toContain(TOKEN);
    expect(call!.yaml).toBe(TASK);
    const yamlPath = call!.argv.at(-1)!;
    expect(yamlPath.startsWith(fake.tmpDir)).toBe(true);
    expect(existsSync(yamlPath)).toBe(false);
    // The task's run saw the YAML's envs and the secret, like a process on the cluster would.
    expect(await eventually('run output', () => fake.log('haru-t-east').includes('domain east token length 8'))).toBe(
      true,
    );
  });

  it("passes the launch spec's secrets from the worker's environment by name only, and refuses one that is not set", async () => {
    const withEnv = fakeSky({ env: { HF_TOKEN: 'hf-secret-91' } });
    try {
      const yaml = TASK.replace('exec sleep 600', 'echo "hf length ${#HF_TOKEN}"\n  exec sleep 600');
      await withEnv.sky.launch({
        name: 'haru-t-east',
        yaml,
        secrets: { HARU_SUPERVISOR_TOKEN: TOKEN },
        envSecrets: ['HF_TOKEN'],
      });
      const [call] = withEnv.calls();
      expect(call!.argv).toEqual(
        skyArgs.launch('haru-t-east', call!.argv.at(-1)!, ['HARU_SUPERVISOR_TOKEN', 'HF_TOKEN']),
      );
      expect(call!.secrets).toEqual({ HARU_SUPERVISOR_TOKEN: TOKEN, HF_TOKEN: 'hf-secret-91' });
      expect(call!.yaml).not.toContain('hf-secret-91');
      expect(await eventually('run output', () => withEnv.log('haru-t-east').includes('hf length 12'))).toBe(true);
      const missing = await withEnv.sky
        .launch({ name: 'haru-t-west', yaml, envSecrets: ['HF_TOKEN', 'WANDB_API_KEY'] })
        .catch((e: unknown) => e);
      expect(missing).toBeInstanceOf(SecretNotSetError);
      expect((missing as Error).message).toMatch(/WANDB_API_KEY is not set/);
      expect(withEnv.calls()).toHaveLength(1);
    } finally {
      await withEnv.sky.down('haru-t-east').catch(() => undefined);
      withEnv.cleanup();
    }
  });

  it('runs setup and run in an empty directory holding only the workdir it ships (what git lists there)', async () => {
    const src = mkdtempSync(path.join(os.tmpdir(), 'haru-workdir-'));
    try {
      writeFileSync(path.join(src, 'shipped.txt'), 'shipped\n');
      writeFileSync(path.join(src, '.gitignore'), 'ignored.txt\n');
      writeFileSync(path.join(src, 'ignored.txt'), 'not shipped\n');
      spawnSync('git', ['init', '-q', src]);
      const task = (workdir: string | null) =>
        [
          'name: haru-t-east',
          ...(workdir ? [`workdir: ${workdir}`] : []),
          'setup: ls -A > setup-saw.txt',
          'run: |',
          '  echo "cwd $(basename "$PWD") files $(ls -A | tr "\\n" " ")"',
          '  exec sleep 600',
          '',
        ].join('\n');
      await fake.sky.launch({ name: 'haru-t-east', yaml: task(src) });
      expect(
        await eventually('run output', () =>
          fake.log('haru-t-east').includes('cwd sky_workdir files .gitignore setup-saw.txt shipped.txt'),
        ),
      ).toBe(true);
      await fake.sky.down('haru-t-east');
      await fake.sky.launch({ name: 'haru-t-west', yaml: task(null).replace('haru-t-east', 'haru-t-west') });
      expect(
        await eventually('run output', () => fake.log('haru-t-west').includes('cwd haru-t-west files setup-saw.txt')),
      ).toBe(true);
      await fake.sky.down('haru-t-west');
    } finally {
      rmSync(src, { recursive: true, force: true });
    }
  });

  it('turns a failed launch into SkyCommandError with the command and the tail of stderr, and still deletes the YAML', async () => {
    const stderr = `${'x'.repeat(STDERR_CAP_CHARS * 2)}\n${readFileSync(path.join(__dirname, '../test/fixtures/sky/launch-resources-unavailable.stderr'), 'utf8')}`;
    fake.script({ launch: { exitCode: 1, stderr } });
    const err = await fake.sky.launch({ name: 'haru-t-east', yaml: TASK }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SkyCommandError);
    const failure = err as SkyCommandError;
    expect(failure.reason).toBe('exit');
    expect(failure.exitCode).toBe(1);
    expect(failure.command.slice(0, 5)).toEqual(['sky', 'launch', '--cluster', 'haru-t-east', '--yes']);
    expect(failure.stderr.length).toBeLessThanOrEqual(STDERR_CAP_CHARS + 1);
    expect(failure.stderr).toContain('ResourcesUnavailableError');
    expect(failure.message).toContain('exited with code 1');
    expect(existsSync(fake.calls()[0]!.argv.at(-1)!)).toBe(false);
  });

  it('streams a slow launch output to the caller while it runs (what the activity heartbeats on)', async () => {
    fake.script({ launch: { delayMs: 1_500, progressEveryMs: 100 } });
    const chunks: string[] = [];
    let settled = false;
    const launching = fake.sky
      .launch({ name: 'haru-t-east', yaml: TASK }, { onOutput: (c) => chunks.push(c) })
      .finally(() => {
        settled = true;
      });
    await eventually('progress output', () => chunks.some((c) => c.includes('still provisioning')));
    expect(settled).toBe(false);
    await launching;
    expect(fake.clusters()['haru-t-east']).toBeDefined();
  });

  it('kills a launch that outlives its timeout and says so', async () => {
    fake.script({ launch: { delayMs: 60_000 } });
    const err = (await fake.sky
      .launch({ name: 'haru-t-east', yaml: TASK }, { timeoutMs: 300 })
      .catch((e: unknown) => e)) as SkyCommandError;
    expect(err).toBeInstanceOf(SkyCommandError);
    expect(err.reason).toBe('timeout');
    expect(err.message).toMatch(/timed out after 300 ms/);
  });

  it('stops a launch when the caller aborts (activity cancellation)', async () => {
    fake.script({ launch: { delayMs: 60_000, progressEveryMs: 50 } });
    const controller = new AbortController();
    const err = (await fake.sky
      .launch({ name: 'haru-t-east', yaml: TASK }, { signal: controller.signal, onOutput: () => controller.abort() })
      .catch((e: unknown) => e)) as SkyCommandError;
    expect(err.reason).toBe('aborted');
  });

  it('refuses a secret name that is not an environment variable name before running anything', async () => {
    await expect(fake.sky.launch({ name: 'haru-t-east', yaml: TASK, secrets: { 'A=B': 'x' } })).rejects.toThrow(
      /not an environment variable name/,
    );
    expect(fake.calls()).toEqual([]);
  });

  it('reports a missing sky binary as a spawn failure', async () => {
    const sky = createSkyCli({ exec: createSpawnExec(), env: { PATH: '/nonexistent' }, bin: 'sky' });
    const err = (await sky.status('x').catch((e: unknown) => e)) as SkyCommandError;
    expect(err).toBeInstanceOf(SkyCommandError);
    expect(err.reason).toBe('spawn');
  });
});

describe('status, stop and down', () => {
  it('reads a launched cluster as UP and an unknown one as null', async () => {
    await fake.sky.launch({ name: 'haru-t-east', yaml: TASK });
    expect(await fake.sky.status('haru-t-east')).toMatchObject({ name: 'haru-t-east', status: 'UP' });
    expect(await fake.sky.status('haru-t-nowhere')).toBeNull();
  });

  it('reads the JSON form when configured for it', async () => {
    const json = fakeSky({ statusOutput: 'json' });
    try {
      json.script({});
      await json.sky.launch({ name: 'haru-t-json', yaml: TASK });
      expect(await json.sky.status('haru-t-json')).toMatchObject({ status: 'UP' });
      expect(json.calls()[1]!.argv).toEqual(['status', '--refresh', '-o', 'json', 'haru-t-json']);
      expect(await json.sky.status('haru-t-other')).toBeNull();
      await json.sky.down('haru-t-json');
    } finally {
      json.cleanup();
    }
  });

  it('turns a status that exits non-zero into SkyCommandError, and unreadable output too', async () => {
    fake.script({
      status: [
        { exitCode: 1, stderr: 'sky.exceptions.ApiServerConnectionError: Could not connect to SkyPilot API server' },
        { stdout: 'garbage\n' },
      ],
    });
    const failed = (await fake.sky.status('haru-t-east').catch((e: unknown) => e)) as SkyCommandError;
    expect(failed.reason).toBe('exit');
    expect(failed.stderr).toContain('ApiServerConnectionError');
    const garbled = (await fake.sky.status('haru-t-east').catch((e: unknown) => e)) as SkyCommandError;
    expect(garbled.reason).toBe('unparseable');
  });

  it('keeps every cluster of launches run at once (each sky process updates the state without losing the others)', async () => {
    const names = ['a', 'b', 'c', 'd', 'e', 'f'].map((n) => `haru-t-${n}`);
    await Promise.all(names.map((name) => fake.sky.launch({ name, yaml: TASK.replace('haru-t-east', name) })));
    const clusters = fake.clusters();
    expect(Object.keys(clusters).sort()).toEqual(names);
    for (const name of names) expect(await fake.sky.status(name)).toMatchObject({ status: 'UP' });
    await Promise.all(names.map((name) => fake.sky.down(name)));
    expect(fake.clusters()).toEqual({});
  });

  it('stops and downs a cluster, killing what its run started; a second down finds nothing', async () => {
    await fake.sky.launch({ name: 'haru-t-east', yaml: TASK });
    const pid = fake.clusters()['haru-t-east']!.pid!;
    expect(alive(pid)).toBe(true);
    expect(await fake.sky.stop('haru-t-east')).toBe('stopped');
    expect(alive(pid)).toBe(false);
    expect(await fake.sky.status('haru-t-east')).toMatchObject({ status: 'STOPPED' });
    expect(await fake.sky.down('haru-t-east')).toBe('down');
    expect(await fake.sky.down('haru-t-east')).toBe('not_found');
    expect(await fake.sky.stop('haru-t-east')).toBe('not_found');
    expect(await fake.sky.status('haru-t-east')).toBeNull();
  });

  it('reads where a cluster exposes a port, null for an unknown cluster, and fails for a port it does not expose', async () => {
    await fake.sky.launch({ name: 'haru-t-east', yaml: TASK });
    expect(await fake.sky.endpoint('haru-t-east', 8701)).toBe('http://127.0.0.1:8701');
    expect(fake.calls().at(-1)!.argv).toEqual(skyArgs.endpoint('haru-t-east', 8701));
    expect(await fake.sky.endpoint('haru-t-nowhere', 8701)).toBeNull();
    const closed = (await fake.sky.endpoint('haru-t-east', 9999).catch((e: unknown) => e)) as SkyCommandError;
    expect(closed).toBeInstanceOf(SkyCommandError);
    // sky/client/cli/command.py _show_endpoint raises click.Abort, of which click prints only `Aborted!`.
    expect(closed.stderr).toContain('Aborted!');
    expect(closed.reason).toBe('exit');
    await fake.sky.stop('haru-t-east');
    await expect(fake.sky.endpoint('haru-t-east', 8701)).rejects.toBeInstanceOf(SkyCommandError);
  });

  it('does not take a failing down for a missing cluster', async () => {
    await fake.sky.launch({ name: 'haru-t-east', yaml: TASK });
    fake.script({
      down: [
        { exitCode: 1, stderr: 'botocore.exceptions.NoCredentialsError: Unable to locate credentials (not found)' },
      ],
    });
    await expect(fake.sky.down('haru-t-east')).rejects.toBeInstanceOf(SkyCommandError);
  });
});

describe('SkyServe', () => {
  it('brings a service up with the secret in the environment, reads its status, and takes it down', async () => {
    await fake.sky.serveUp({ name: 'haru-t-east', yaml: SERVICE, secrets: { HARU_SUPERVISOR_TOKEN: TOKEN } });
    const [call] = fake.calls();
    expect(call!.argv.slice(0, -1)).toEqual(skyArgs.serveUp('haru-t-east', '', ['HARU_SUPERVISOR_TOKEN']).slice(0, -1));
    expect(call!.secrets).toEqual({ HARU_SUPERVISOR_TOKEN: TOKEN });
    expect(existsSync(call!.argv.at(-1)!)).toBe(false);
    expect(await fake.sky.serveStatus('haru-t-east')).toMatchObject({
      status: 'READY',
      replicas: { ready: 1, total: 1 },
      replicaList: [{ id: 1, status: 'READY' }],
    });
    expect(await fake.sky.serveEndpoint('haru-t-east')).toBe('http://127.0.0.1:8701');
    expect(await fake.sky.serveEndpoint('haru-t-nowhere')).toBeNull();
    expect(await fake.sky.serveDown('haru-t-east')).toBe('down');
    expect(await fake.sky.serveStatus('haru-t-east')).toBeNull();
    expect(await fake.sky.serveDown('haru-t-east')).toBe('not_found');
  });

  it('purges a failed service SkyServe skipped (exit 0, resources left up) and reports it purged', async () => {
    await fake.sky.serveUp({ name: 'haru-t-east', yaml: SERVICE, secrets: { HARU_SUPERVISOR_TOKEN: TOKEN } });
    const services = JSON.parse(readFileSync(path.join(fake.state, 'services.json'), 'utf8')) as Record<
      string,
      { status: string }
    >;
    services['haru-t-east']!.status = 'CONTROLLER_FAILED';
    writeFileSync(path.join(fake.state, 'services.json'), JSON.stringify(services));
    expect(await fake.sky.serveStatus('haru-t-east')).toMatchObject({ status: 'CONTROLLER_FAILED' });
    expect(await fake.sky.serveDown('haru-t-east')).toBe('purged');
    expect(
      fake
        .calls()
        .map((c) => c.argv.join(' '))
        .filter((a) => a.startsWith('serve down')),
    ).toEqual(['serve down haru-t-east --yes', 'serve down haru-t-east --yes --purge']);
    expect(await fake.sky.serveStatus('haru-t-east')).toBeNull();
  });

  it('fails loudly when even the purge leaves the failed service up', async () => {
    const skipped = readFileSync(
      path.join(__dirname, '../test/fixtures/sky/sky-serve-down-failed-skipped.txt'),
      'utf8',
    );
    fake.script({
      'serve down': [
        { stdout: skipped.replace(/haru-prod-failed/g, 'haru-t-east') },
        { stdout: skipped.replace(/haru-prod-failed/g, 'haru-t-east') },
      ],
    });
    const err = (await fake.sky.serveDown('haru-t-east').catch((e: unknown) => e)) as SkyCommandError;
    expect(err).toBeInstanceOf(SkyCommandError);
    expect(err.command).toEqual(['sky', ...skyArgs.serveDown('haru-t-east', { purge: true })]);
  });

  it('reads "No live services." (no serve controller) as no service, for status, endpoint and down', async () => {
    expect(await fake.sky.serveStatus('haru-t-east')).toBeNull();
    expect(await fake.sky.serveEndpoint('haru-t-east')).toBeNull();
    expect(await fake.sky.serveDown('haru-t-east')).toBe('not_found');
  });

  it('reports a rejected service YAML as SkyCommandError', async () => {
    const err = (await fake.sky
      .serveUp({ name: 'haru-t-east', yaml: TASK })
      .catch((e: unknown) => e)) as SkyCommandError;
    expect(err).toBeInstanceOf(SkyCommandError);
    expect(err.stderr).toMatch(/Service section not found/);
  });
});
