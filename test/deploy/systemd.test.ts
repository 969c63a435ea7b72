/**
 * The systemd units of a static GPU host (deploy/systemd/): checked by the real `systemd-analyze verify`,
 * their environment files against the code and the example supervisor config, the start order their
 * drop-ins give, and the commands they run (the vLLM one run for real, with a stand-in `vllm`).
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseEnvFile, vllmEnvFileSchema } from '../../deploy/gpu-host/plan';
import { supervisorEnvSchema } from '../../supervisor/config';
import { RUN_AS_CAPABILITIES } from '../../supervisor/run-as';
import { supervisorConfigSchema } from '../../schemas/supervisor';
import { freePort } from '../support/ports';
import { describeWithTools, SYSTEMD_ANALYZE } from '../support/tools';

const ROOT = path.resolve(__dirname, '../..');
const UNITS = path.join(ROOT, 'deploy/systemd');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');

const readEnvFile = (file: string) => parseEnvFile(readFileSync(file, 'utf8'));

/** The value of `key` in a unit file's sections (the last one wins, as in systemd). */
function directive(unitText: string, key: string): string {
  const lines = unitText.split('\n').filter((l) => l.startsWith(`${key}=`));
  if (!lines.length) throw new Error(`no ${key}=`);
  return lines.at(-1)!.slice(key.length + 1);
}

/**
 * An Exec*= command line expanded the way systemd does it: `%i` is the instance, `${VAR}` one word (also
 * inside a word), a lone `$VAR` split on whitespace. The shipped lines use no quoting.
 */
function expandExec(line: string, instance: string, env: Record<string, string>): string[] {
  expect(line).not.toMatch(/["'\\]/);
  return line
    .trim()
    .split(/\s+/)
    .flatMap((word) => {
      const lone = /^\$([A-Za-z_]\w*)$/.exec(word);
      if (lone) return (env[lone[1]!] ?? '').split(/\s+/).filter(Boolean);
      return [word.replace(/%i/g, instance).replace(/\$\{(\w+)\}/g, (_m, name: string) => env[name] ?? '')];
    });
}

const supervisorJson = supervisorConfigSchema.parse(JSON.parse(read('examples/supervisor.json')));
const vllmEnvDir = path.join(UNITS, 'env/vllm');
const vllmInstances = readdirSync(vllmEnvDir)
  .filter((f) => f.endsWith('.env'))
  .map((f) => f.slice(0, -'.env'.length))
  .sort();
const vllmEnv = (name: string) => readEnvFile(path.join(vllmEnvDir, `${name}.env`));
const vllmUnit = readFileSync(path.join(UNITS, 'haru-vllm@.service'), 'utf8');
const supervisorUnit = readFileSync(path.join(UNITS, 'haru-supervisor.service'), 'utf8');

describeWithTools('deploy/systemd: systemd-analyze verify', [SYSTEMD_ANALYZE], () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'haru-systemd-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /**
   * The units as installed, with the install paths pointing at this checkout (so verify also checks that
   * every executable they name is shipped and executable) and /etc/haru, /var/lib/haru at a temp dir.
   */
  function install(edit: (name: string, text: string) => string = (_n, t) => t): string {
    const units = path.join(dir, 'units');
    mkdirSync(units, { recursive: true });
    cpSync(path.join(UNITS, 'env'), path.join(dir, 'etc'), { recursive: true });
    for (const entry of readdirSync(UNITS, { withFileTypes: true })) {
      const from = path.join(UNITS, entry.name);
      if (entry.isDirectory() && entry.name.endsWith('.service.d'))
        cpSync(from, path.join(units, entry.name), { recursive: true });
      if (!entry.isFile() || !entry.name.endsWith('.service')) continue;
      const text = edit(entry.name, readFileSync(from, 'utf8'))
        .replaceAll('/opt/haru', ROOT)
        .replaceAll('/usr/bin/node', process.execPath)
        .replaceAll('/etc/haru', path.join(dir, 'etc'))
        .replaceAll('/var/lib/haru', dir);
      writeFileSync(path.join(units, entry.name), text);
    }
    return units;
  }

  const verify = (units: string, names: string[]) =>
    spawnSync('systemd-analyze', ['verify', '--man=no', ...names.map((n) => path.join(units, n))], {
      encoding: 'utf8',
      cwd: dir,
    });

  it('accepts the supervisor unit and every vLLM instance with its drop-ins, with no warning', () => {
    const units = install();
    const names = ['haru-supervisor.service', ...vllmInstances.map((n) => `haru-vllm@${n}.service`)];
    const run = verify(units, names);
    expect({ status: run.status, stderr: run.stderr }).toEqual({ status: 0, stderr: '' });
  });

  it('notices what it can notice: an unknown setting, a missing executable', () => {
    const misspelt = install((_n, text) => text.replace('KillMode=', 'KilMode='));
    expect(verify(misspelt, ['haru-supervisor.service']).stderr).toMatch(/Unknown key 'KilMode'/);
    const moved = install((_n, text) => text.replace('/opt/haru/examples/vllm-launch.sh', '/opt/haru/nowhere.sh'));
    const missing = verify(moved, [`haru-vllm@${vllmInstances[0]}.service`]);
    expect(missing.status).not.toBe(0);
    expect(missing.stderr).toMatch(/is not executable/);
  });
});

describe('deploy/systemd: environment files', () => {
  it('supervisor.env sets only variables the supervisor reads, all valid, on loopback behind the gateway, and no secret', () => {
    const env = readEnvFile(path.join(UNITS, 'env/supervisor.env'));
    const known = Object.keys(supervisorEnvSchema.shape);
    expect(Object.keys(env).filter((k) => !known.includes(k))).toEqual([]);
    const parsed = supervisorEnvSchema.parse(env);
    expect(parsed.HARU_SUPERVISOR_HOST).toBe('127.0.0.1');
    expect(Object.keys(env).filter((k) => k.startsWith('HARU_SUPERVISOR_TOKEN'))).toEqual([]);
    expect(parsed.HARU_SUPERVISOR_CONFIG).toBe('/etc/haru/supervisor.json');
    // The gateway forwards to this port, and the unit waits for it.
    expect(read('deploy/nginx/haru-gpu-host.conf')).toContain(`proxy_pass http://127.0.0.1:${parsed.PORT}/v1/;`);
    expect(directive(supervisorUnit, 'EnvironmentFile')).toBe('/etc/haru/supervisor.env');
    expect(directive(supervisorUnit, 'ExecStartPost')).toContain('http://127.0.0.1:${PORT}/healthz');
  });

  it('has one vLLM env file per model of examples/supervisor.json, with its GPU and port, and the gateway maps the same ports', () => {
    const configured = supervisorJson.inference.flatMap((slot) =>
      slot.models.map((m) => ({ name: m.name, gpu: String(slot.gpuIndex), port: String(m.port) })),
    );
    expect(vllmInstances).toEqual(configured.map((m) => m.name).sort());
    for (const m of configured) {
      const env = vllmEnv(m.name);
      expect({ name: m.name, gpu: env.HARU_VLLM_GPU, port: env.HARU_VLLM_PORT }).toEqual(m);
      // The files the GPU-host image's launcher reads too.
      expect(vllmEnvFileSchema.safeParse(env).error?.issues ?? []).toEqual([]);
    }
    const mapped = read('deploy/nginx/models.map')
      .split('\n')
      .filter((l) => l.trim() && !l.startsWith('#'))
      .map((l) => l.replace(/;\s*$/, '').split(/\s+/));
    expect(Object.fromEntries(mapped)).toEqual(Object.fromEntries(configured.map((m) => [m.name, m.port])));
    expect(directive(vllmUnit, 'EnvironmentFile')).toBe('/etc/haru/vllm/%i.env');
  });
});

describe('deploy/systemd: the supervisor unit ships the protections on', () => {
  it('hands the token over as a root-only credential file, never a variable', () => {
    expect(directive(supervisorUnit, 'LoadCredential')).toBe('supervisor-token:/etc/haru/supervisor.token');
    // %d: the service's credentials directory ($CREDENTIALS_DIRECTORY), mode 0400 files only it may read.
    expect(directive(supervisorUnit, 'Environment')).toBe('HARU_SUPERVISOR_TOKEN_FILE=%d/supervisor-token');
    expect(supervisorUnit).not.toMatch(/^Environment=.*HARU_SUPERVISOR_TOKEN=/m);
  });

  it('grants the supervisor exactly the capabilities running trainers as another user takes, as ambient and bound', () => {
    const wanted = Object.keys(RUN_AS_CAPABILITIES).sort();
    expect(directive(supervisorUnit, 'User')).toBe('haru');
    expect(directive(supervisorUnit, 'AmbientCapabilities').split(/\s+/).sort()).toEqual(wanted);
    expect(directive(supervisorUnit, 'CapabilityBoundingSet').split(/\s+/).sort()).toEqual(wanted);
    // And, as root before it starts, keeps those trainers off the host's engines (test/supervisor/trainer-firewall).
    expect(directive(supervisorUnit, 'ExecStartPre')).toBe(
      '+/usr/bin/node /opt/haru/bin/haru.js supervisor --trainer-firewall',
    );
  });

  it('delegates its cgroup subtree, so each training run gets a cgroup of its own', () => {
    expect(directive(supervisorUnit, 'Delegate')).toBe('yes');
    expect(supervisorUnit).not.toMatch(/^Environment=.*HARU_TRAINING_ALLOW_PGROUP/m);
    expect(read('deploy/systemd/env/supervisor.env')).not.toMatch(/^HARU_TRAINING_ALLOW_PGROUP=/m);
  });

  it('needs no HARU_HOST_PROC: the unit runs in the host’s PID namespace, where nvidia-smi’s pids are its own', () => {
    expect(supervisorUnit).not.toMatch(/PrivatePIDs=yes/);
    expect(read('deploy/systemd/env/supervisor.env')).not.toMatch(/HARU_HOST_PROC/);
  });
});

describe('deploy/systemd: start order', () => {
  /** `After=` units of an instance's drop-ins. */
  const afterOf = (name: string): string[] => {
    const dropIns = path.join(UNITS, `haru-vllm@${name}.service.d`);
    let files: string[] = [];
    try {
      files = readdirSync(dropIns).filter((f) => f.endsWith('.conf'));
    } catch {
      return [];
    }
    return files.flatMap((f) =>
      readFileSync(path.join(dropIns, f), 'utf8')
        .split('\n')
        .filter((l) => l.startsWith('After='))
        .flatMap((l) => l.slice('After='.length).trim().split(/\s+/)),
    );
  };

  it('starts each GPU’s servers one after another, in supervisor.json order, and different GPUs independently', () => {
    for (const slot of supervisorJson.inference) {
      slot.models.forEach((m, i) => {
        const expected = i === 0 ? [] : [`haru-vllm@${slot.models[i - 1]!.name}.service`];
        expect({ model: m.name, after: afterOf(m.name) }).toEqual({ model: m.name, after: expected });
      });
    }
    const dropInDirs = readdirSync(UNITS).filter((f) => f.endsWith('.service.d'));
    expect(dropInDirs.filter((d) => !vllmInstances.some((n) => d === `haru-vllm@${n}.service.d`))).toEqual([]);
  });

  it('counts a vLLM server as started only once it serves, and keeps the supervisor independent of the engines', () => {
    expect(directive(vllmUnit, 'Type')).toBe('exec');
    expect(directive(vllmUnit, 'ExecStartPost')).toBe(
      '/usr/bin/node /opt/haru/deploy/bin/wait-http.js http://127.0.0.1:${HARU_VLLM_PORT}/health 1800',
    );
    expect(Number(directive(vllmUnit, 'TimeoutStartSec'))).toBeGreaterThanOrEqual(1800);
    expect(supervisorUnit).not.toMatch(/^(After|Before|Requires|Wants|BindsTo)=.*haru-vllm/m);
    expect(directive(supervisorUnit, 'After')).toBe('network-online.target');
    // The supervisor stops its training runs itself on SIGTERM, within its grace; systemd waits longer.
    expect(directive(supervisorUnit, 'KillMode')).toBe('mixed');
    const grace = supervisorEnvSchema.parse(readEnvFile(path.join(UNITS, 'env/supervisor.env')));
    expect(Number(directive(supervisorUnit, 'TimeoutStopSec')) * 1000).toBeGreaterThan(grace.HARU_SHUTDOWN_GRACE_MS);
  });
});

describe('deploy/systemd: the commands the units run', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'haru-units-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('runs `vllm serve` with sleep mode, the dev endpoints, loopback only, the served name and the env file’s settings', () => {
    // A stand-in `vllm` first on PATH records how it was started.
    const bin = path.join(dir, 'bin');
    mkdirSync(bin, { recursive: true });
    writeFileSync(
      path.join(bin, 'vllm'),
      `#!${process.execPath}\nconst e = process.env;\nconsole.log(JSON.stringify({ argv: process.argv.slice(2), dev: e.VLLM_SERVER_DEV_MODE, cuda: e.CUDA_VISIBLE_DEVICES, haru: Object.keys(e).filter((k) => k.startsWith('HARU_SUPERVISOR')) }));\n`,
    );
    chmodSync(path.join(bin, 'vllm'), 0o755);
    for (const name of vllmInstances) {
      const env = vllmEnv(name);
      const [command, ...args] = expandExec(directive(vllmUnit, 'ExecStart'), name, env);
      expect(command).toBe('/opt/haru/examples/vllm-launch.sh');
      // Started from an environment holding the supervisor's secrets, as a SkyPilot `run` is.
      const secrets = {
        HARU_SUPERVISOR_TOKEN: 'tok',
        HARU_SUPERVISOR_TOKEN_PREVIOUS: 'old',
        HARU_SUPERVISOR_TLS_CERT_B64: 'cert',
        HARU_SUPERVISOR_TLS_KEY_B64: 'key',
      };
      const out = execFileSync(path.join(ROOT, command!.slice('/opt/haru/'.length)), args, {
        env: { ...env, ...secrets, PATH: `${bin}:${process.env.PATH}` },
        encoding: 'utf8',
      });
      const seen = JSON.parse(out) as { argv: string[]; dev: string; cuda: string; haru: string[] };
      expect(seen.haru).toEqual([]); // the engine holds none of them
      expect(seen.dev).toBe('1');
      expect(seen.cuda).toBe(env.HARU_VLLM_GPU);
      expect(seen.argv.slice(0, 2)).toEqual(['serve', env.HARU_VLLM_MODEL]);
      const flag = (f: string) => seen.argv[seen.argv.indexOf(f) + 1];
      expect(flag('--served-model-name')).toBe(name);
      expect(flag('--host')).toBe('127.0.0.1');
      expect(flag('--port')).toBe(env.HARU_VLLM_PORT);
      expect(seen.argv).toContain('--enable-sleep-mode');
      // The extra arguments arrive as separate words.
      expect(seen.argv.join(' ')).toContain(env.HARU_VLLM_ARGS!);
      expect(seen.argv).toEqual(expect.arrayContaining(env.HARU_VLLM_ARGS!.split(' ')));
    }
  });

  it('runs the supervisor as `haru supervisor` from the install directory', () => {
    expect(directive(supervisorUnit, 'ExecStart')).toBe('/usr/bin/node /opt/haru/bin/haru.js supervisor');
    expect(directive(supervisorUnit, 'WorkingDirectory')).toBe('/opt/haru');
  });

  it('wait-http.js returns only once the URL answers 2xx, and fails after its timeout', async () => {
    let calls = 0;
    const server = http.createServer((_req, res) => {
      calls += 1;
      res.writeHead(calls < 3 ? 503 : 200).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/health`;
    const wait = (target: string, timeout: string) =>
      new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, [path.join(ROOT, 'deploy/bin/wait-http.js'), target, timeout]);
        let stderr = '';
        child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
        child.on('exit', (code) => resolve({ code, stderr }));
      });
    try {
      expect(await wait(url, '30')).toEqual({ code: 0, stderr: '' });
      expect(calls).toBe(3);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
    const closed = await wait(`http://127.0.0.1:${await freePort()}/health`, '1');
    expect(closed.code).toBe(1);
    expect(closed.stderr).toMatch(/not ready after 1 s \(last: ECONNREFUSED\)/);
  });
});
