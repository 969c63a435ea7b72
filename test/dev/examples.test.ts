/**
 * Every file in examples/ is something a user copies: layouts and the supervisor config must pass the
 * same validation the CLI applies, the vLLM launch script must start vLLM the way Haru requires, and the
 * LoRA trainer template's checkpoint files must survive a kill at any point.
 */
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { validateLayout } from '../../db/layout-apply';
import { fleetLayoutSchema } from '../../schemas/layout';
import { supervisorConfigSchema } from '../../schemas/supervisor';
import { loadSupervisorConfig } from '../../supervisor/config';
import { PROGRESS_FILE, progressFile, readProgress } from '../../supervisor/training-progress';
import { waitFor } from '../supervisor/support';
import { freePort } from '../support/ports';

const EXAMPLES = path.resolve(__dirname, '../../examples');
const read = (name: string) => readFileSync(path.join(EXAMPLES, name), 'utf8');
const layoutFiles = readdirSync(EXAMPLES).filter((f) => f.endsWith('.layout.json'));

describe('example fleet layouts', () => {
  it('ships the dev, compose and production layouts', () => {
    expect(layoutFiles.sort()).toEqual(['compose.layout.json', 'dev.layout.json', 'production.layout.json']);
  });

  it.each(layoutFiles)('%s passes the layout schema and the seed validation', (file) => {
    const json: unknown = JSON.parse(read(file));
    const parsed = fleetLayoutSchema.safeParse(json);
    expect(parsed.error?.issues ?? []).toEqual([]);
    const validation = validateLayout(json);
    expect(validation.ok ? [] : validation.problems).toEqual([]);
  });

  it.each(layoutFiles)(
    '%s mirrors one bundle across two domains: small models on GPU 0, one large model on GPU 1, a trainer per GPU',
    (file) => {
      const layout = fleetLayoutSchema.parse(JSON.parse(read(file)));
      expect(layout.domains).toHaveLength(2);
      const bundles = layout.domains.map((d) =>
        d.slots
          .map((s) =>
            s.kind === 'inference' ? `${s.gpuIndex}:${s.models.map((m) => m.name).join('+')}` : `${s.gpuIndex}:train`,
          )
          .sort(),
      );
      expect(bundles[0]).toEqual(bundles[1]);
      for (const domain of layout.domains) {
        const inference = domain.slots.flatMap((s) => (s.kind === 'inference' ? [s] : []));
        expect(inference.find((s) => s.gpuIndex === 0)?.models.length).toBeGreaterThanOrEqual(2);
        expect(inference.find((s) => s.gpuIndex === 1)?.models).toHaveLength(1);
        expect(
          domain.slots
            .filter((s) => s.kind === 'training')
            .map((s) => s.gpuIndex)
            .sort(),
        ).toEqual([0, 1]);
      }
    },
  );

  it('places the production domains on two clouds through SkyPilot', () => {
    const layout = fleetLayoutSchema.parse(JSON.parse(read('production.layout.json')));
    expect(layout.domains.map((d) => d.provider)).toEqual(['skypilot', 'skypilot']);
    const clouds = new Set(layout.domains.map((d) => d.placement.cloud));
    expect(clouds.size).toBe(2);
    for (const d of layout.domains) expect(d.launch?.run).toContain('examples/vllm-start.sh');
  });

  it('ships what its production setup and run use: the checkout as workdir, and only files it holds', () => {
    const layout = fleetLayoutSchema.parse(JSON.parse(read('production.layout.json')));
    const repo = path.resolve(EXAMPLES, '..');
    // What SkyPilot syncs from the workdir: the files git lists, without what .gitignore excludes.
    const listed = spawnSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], {
      cwd: repo,
      encoding: 'utf8',
    });
    expect(listed.status).toBe(0);
    const shipped = new Set(listed.stdout.split('\n').filter(Boolean));
    for (const d of layout.domains) {
      expect(d.launch?.workdir).toBe('.');
      expect(d.launch?.secrets).toEqual(['HF_TOKEN']);
      const commands = `${d.launch?.setup ?? ''}\n${d.launch?.run ?? ''}`;
      const files = [...commands.matchAll(/(?:^|[\s=(])((?:examples|bin)\/[\w./-]+)/g)].map((m) => m[1]!);
      expect(files).toEqual(expect.arrayContaining(['examples/sky-setup.sh', 'examples/vllm-start.sh', 'bin/haru.js']));
      for (const f of files) expect({ file: f, shipped: shipped.has(f) }).toEqual({ file: f, shipped: true });
      // The training commands run from the supervisor's directory: the same shipped checkout.
      for (const slot of d.slots) if (slot.kind === 'training') expect(shipped.has(slot.command[1]!)).toBe(true);
    }
  });

  it('points the compose layout at the compose services by hostname', () => {
    const layout = fleetLayoutSchema.parse(JSON.parse(read('compose.layout.json')));
    for (const d of layout.domains) {
      expect(new URL(d.supervisorUrl).hostname).toBe(`sim-${d.slug}`);
      for (const s of d.slots)
        if (s.kind === 'inference')
          for (const m of s.models) expect(new URL(m.servingUrl).hostname).toBe(`sim-${d.slug}`);
    }
  });
});

describe('example supervisor config', () => {
  it('passes the supervisor config schema and loads as `haru supervisor` loads it', () => {
    const file = path.join(EXAMPLES, 'supervisor.json');
    const parsed = supervisorConfigSchema.safeParse(JSON.parse(read('supervisor.json')));
    expect(parsed.error?.issues ?? []).toEqual([]);
    const config = loadSupervisorConfig(file, (f) => readFileSync(f, 'utf8'));
    expect(config.inference.map((s) => s.gpuIndex)).toEqual([0, 1]);
    expect(config.training.map((s) => s.gpuIndex)).toEqual([0, 1]);
  });

  it('serves the same models on the same GPUs as one production domain', () => {
    const config = supervisorConfigSchema.parse(JSON.parse(read('supervisor.json')));
    const layout = fleetLayoutSchema.parse(JSON.parse(read('production.layout.json')));
    const fromLayout = layout.domains[0]!.slots.flatMap((s) =>
      s.kind === 'inference' ? s.models.map((m) => `${s.gpuIndex}:${m.name}`) : [],
    );
    const fromConfig = config.inference.flatMap((s) => s.models.map((m) => `${s.gpuIndex}:${m.name}`));
    expect(fromConfig.sort()).toEqual(fromLayout.sort());
  });
});

describe('examples/vllm-launch.sh', () => {
  const script = read('vllm-launch.sh');

  it('starts vLLM with sleep mode, the dev-mode admin endpoints, the served name and a loopback bind', () => {
    expect(script).toMatch(/export VLLM_SERVER_DEV_MODE=1/);
    expect(script).toMatch(/--enable-sleep-mode/);
    expect(script).toMatch(/--served-model-name "\$served_name"/);
    expect(script).toMatch(/--host 127\.0\.0\.1/);
    expect(script).toMatch(/export CUDA_VISIBLE_DEVICES="\$gpu_index"/);
  });

  /**
   * A stub `vllm` on PATH: records its environment and argv, then after `STUB_LOAD_S` serves `/health` on
   * its `--port` (what vLLM does once loaded), or exits at once with `STUB_EXIT`. The launch log lists
   * `start PORT` and `ready PORT` lines in the order they happened.
   */
  function stubVllm(dir: string) {
    const stub = path.join(dir, 'vllm');
    writeFileSync(
      stub,
      `#!/usr/bin/env python3
import http.server, os, sys, time
argv = sys.argv[1:]
port = int(argv[argv.index('--port') + 1])
log = open(os.environ['STUB_LOG'], 'a')
def say(line):
    log.write(line + '\\n'); log.flush()
say('start %d CUDA_VISIBLE_DEVICES=%s VLLM_SERVER_DEV_MODE=%s %s' % (port, os.environ['CUDA_VISIBLE_DEVICES'], os.environ['VLLM_SERVER_DEV_MODE'], ' '.join(argv)))
if os.environ.get('STUB_EXIT'): sys.exit(int(os.environ['STUB_EXIT']))
time.sleep(float(os.environ.get('STUB_LOAD_S', '0')))
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == '/health' else 404); self.end_headers()
    def log_message(self, *args): pass
server = http.server.HTTPServer(('127.0.0.1', port), Health)
say('ready %d' % port)
open(os.path.join(os.environ['STUB_PIDS'], str(os.getpid())), 'w').close()
server.serve_forever()
`,
      { mode: 0o755 },
    );
    return stub;
  }

  // The servers outlive the script and hold what it wrote to: its output goes to files, not pipes a
  // synchronous spawn would wait on.
  const launchIn = (dir: string, command: string, env: NodeJS.ProcessEnv = {}) => {
    const [out, err] = [path.join(dir, 'stdout'), path.join(dir, 'stderr')];
    const fds = [openSync(out, 'w'), openSync(err, 'w')] as const;
    try {
      const r = spawnSync('sh', ['-c', command], {
        cwd: path.resolve(EXAMPLES, '..'),
        stdio: ['ignore', fds[0], fds[1]],
        env: {
          ...process.env,
          PATH: `${dir}:${process.env.PATH}`,
          STUB_LOG: path.join(dir, 'log'),
          STUB_PIDS: dir,
          VLLM_READY_POLL_S: '0.1',
          ...env,
        },
        timeout: 60_000,
      });
      return { status: r.status, stdout: readFileSync(out, 'utf8'), stderr: readFileSync(err, 'utf8') };
    } finally {
      fds.forEach((fd) => closeSync(fd));
    }
  };

  const killStubs = (dir: string) => {
    for (const f of readdirSync(dir).filter((n) => /^\d+$/.test(n))) {
      try {
        process.kill(Number(f), 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
  };

  it('runs the vllm command it builds, with the arguments in place, and returns once /health answers', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-vllm-launch-'));
    try {
      stubVllm(dir);
      const port = await freePort();
      const r = launchIn(
        dir,
        `examples/vllm-start.sh 1 ${port} qwen-32b Qwen/Qwen2.5-32B-Instruct --max-model-len 4096`,
      );
      expect(r.stderr).toBe('');
      expect(r.status).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`qwen-32b ready on 127\\.0\\.0\\.1:${port}`));
      const [start] = readFileSync(path.join(dir, 'log'), 'utf8').trim().split('\n');
      expect(start).toBe(
        `start ${port} CUDA_VISIBLE_DEVICES=1 VLLM_SERVER_DEV_MODE=1 serve Qwen/Qwen2.5-32B-Instruct ` +
          `--served-model-name qwen-32b --host 127.0.0.1 --port ${port} --enable-sleep-mode --max-model-len 4096`,
      );
      // Still serving after the script returned.
      expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
      const usage = spawnSync('sh', [path.join(EXAMPLES, 'vllm-start.sh')], { encoding: 'utf8' });
      expect(usage.status).toBe(2);
      expect(usage.stderr).toMatch(/usage:/);
    } finally {
      killStubs(dir);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("starts a GPU's servers one after another: the next starts only once the one before answers /health", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-vllm-launch-'));
    try {
      stubVllm(dir);
      const [a, b] = [await freePort(), await freePort()];
      const r = launchIn(dir, `examples/vllm-start.sh 0 ${a} qwen-0.5b Q && examples/vllm-start.sh 0 ${b} llama-1b L`, {
        STUB_LOAD_S: '1',
      });
      expect(r.status).toBe(0);
      const events = readFileSync(path.join(dir, 'log'), 'utf8')
        .trim()
        .split('\n')
        .map((line) => line.split(' ').slice(0, 2).join(' '));
      expect(events).toEqual([`start ${a}`, `ready ${a}`, `start ${b}`, `ready ${b}`]);
    } finally {
      killStubs(dir);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('fails, naming the server, when vLLM exits before it is ready or is not ready in time', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-vllm-launch-'));
    try {
      stubVllm(dir);
      const port = await freePort();
      const died = launchIn(dir, `examples/vllm-start.sh 0 ${port} qwen-0.5b Q && echo next`, { STUB_EXIT: '3' });
      expect(died.status).toBe(1);
      expect(died.stdout).not.toMatch(/next/);
      expect(died.stderr).toMatch(/qwen-0\.5b \(GPU 0, port \d+\) exited with 3 before it was ready/);
      const slow = launchIn(dir, `examples/vllm-start.sh 0 ${port} qwen-0.5b Q`, {
        STUB_LOAD_S: '30',
        VLLM_READY_TIMEOUT_S: '1',
      });
      expect(slow.status).toBe(1);
      expect(slow.stderr).toMatch(/not ready after 1 s; stopped it/);
    } finally {
      killStubs(dir);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('examples/lora-trainer.py', () => {
  const trainer = path.join(EXAMPLES, 'lora-trainer.py');
  const python = (code: string, env: NodeJS.ProcessEnv = {}) =>
    spawnSync('python3', ['-c', code], {
      encoding: 'utf8',
      env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1', ...env },
    });
  const load = `import importlib.util, json, os, sys\nspec = importlib.util.spec_from_file_location("t", ${JSON.stringify(trainer)})\nt = importlib.util.module_from_spec(spec); spec.loader.exec_module(t)\n`;

  it('is valid Python that loads without torch (imports are lazy)', () => {
    const r = python(`${load}print(t.CHECKPOINT_PREFIX)`);
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe('ckpt-');
  });

  it('pins itself to HARU_GPU_INDEX and refuses to run without its variables', () => {
    const pinned = python(`${load}t.pin_gpu(); print(os.environ["CUDA_VISIBLE_DEVICES"])`, {
      HARU_GPU_INDEX: '3',
      CUDA_VISIBLE_DEVICES: '0,1,2,3',
    });
    expect(pinned.stdout.trim()).toBe('3');
    const mig = 'MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f';
    const onMig = python(
      `${load}t.pin_gpu(); print(os.environ["CUDA_VISIBLE_DEVICES"], os.environ["CUDA_DEVICE_ORDER"])`,
      {
        HARU_GPU_INDEX: '3',
        CUDA_VISIBLE_DEVICES: mig,
      },
    );
    expect(onMig.stdout.trim()).toBe(`${mig} PCI_BUS_ID`);
    const noCheckpointDir = spawnSync('python3', [trainer, '--base-model', 'x'], {
      encoding: 'utf8',
      env: { ...process.env, HARU_CHECKPOINT_DIR: '', PYTHONDONTWRITEBYTECODE: '1' },
    });
    expect(noCheckpointDir.status).not.toBe(0);
    expect(noCheckpointDir.stderr).toMatch(/HARU_CHECKPOINT_DIR must be set/);
  });

  it('reports progress by replacing $HARU_TRAINING_PROGRESS_FILE with what the supervisor reads', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-lora-progress-'));
    try {
      const r = python(
        `${load}t.report_progress(12, 100, 1.5)\nt.report_progress(13, 100, 1.25)\nprint(os.listdir(${JSON.stringify(dir)}))`,
        {
          HARU_TRAINING_PROGRESS_FILE: progressFile(dir),
        },
      );
      expect(r.stderr).toBe('');
      expect(r.stdout.trim()).toBe(`['${PROGRESS_FILE}']`); // no temporary left beside it
      expect(readProgress(dir, new Date())).toMatchObject({ step: 13, totalSteps: 100, loss: 1.25, error: null });
      expect(python(`${load}t.report_progress(1, None, None)`, { HARU_TRAINING_PROGRESS_FILE: '' }).status).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('ends at once on SIGTERM while loading, and while training lets the loop finish the step and save', async () => {
    const run = (code: string) => {
      const child = spawn('python3', ['-c', `${load}${code}`], {
        env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let out = '';
      child.stdout.on('data', (c: Buffer) => (out += c.toString()));
      const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
        child.once('exit', (code, signal) => resolve({ code, signal })),
      );
      return { child, exited, out: () => out };
    };
    // A model load is a long C call: sleep stands in for it. The default action ends it mid-call.
    const loading = run(
      `import time\nstop = t.StopRequested()\nprint("loading", flush=True)\ntime.sleep(60)\nprint("loaded", flush=True)`,
    );
    await waitFor('loading', () => loading.out().includes('loading'));
    const sentAt = Date.now();
    loading.child.kill('SIGTERM');
    expect(await loading.exited).toEqual({ code: null, signal: 'SIGTERM' });
    expect(Date.now() - sentAt).toBeLessThan(5_000);
    expect(loading.out()).not.toContain('loaded');

    const training = run(
      `import time\nstop = t.StopRequested()\nstop.training()\nprint("training", flush=True)\nwhile not stop: time.sleep(0.01)\nprint("saved after signal", stop.signal, flush=True)`,
    );
    await waitFor('training', () => training.out().includes('training'));
    training.child.kill('SIGTERM');
    expect(await training.exited).toEqual({ code: 0, signal: null });
    expect(training.out()).toContain('saved after signal 15');
  });

  it('resumes from the newest complete checkpoint after a kill mid-save, and cleans up what the kill left', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-lora-'));
    try {
      // Two committed checkpoints, then the states a SIGKILL can leave: a half-written temporary, a renamed
      // directory without its COMPLETE marker, and a torn pointer temp file.
      const r = python(
        `${load}root = ${JSON.stringify(dir)}
for step in (50, 100):
    tmp = t.begin_checkpoint(root, step)
    t.atomic_write_text(os.path.join(tmp, "state.json"), json.dumps({"step": step}))
    t.commit_checkpoint(root, tmp, step)
half = t.begin_checkpoint(root, 150)
open(os.path.join(half, "state.json"), "w").write('{"ste')
os.makedirs(os.path.join(root, "ckpt-000200"))
open(os.path.join(root, "latest.tmp-999"), "w").write("ckpt-0")
print(os.path.basename(t.latest_checkpoint(root)))
t.clean_checkpoints(root)
print(sorted(os.listdir(root)))
open(os.path.join(root, "latest"), "w").write("ckpt-000999")
print(os.path.basename(t.latest_checkpoint(root)))
for step in (150, 200):
    tmp = t.begin_checkpoint(root, step)
    t.commit_checkpoint(root, tmp, step)
t.clean_checkpoints(root)
print(sorted(os.listdir(root)))
`,
      );
      expect(r.stderr).toBe('');
      expect(r.stdout.trim().split('\n')).toEqual([
        'ckpt-000100',
        "['ckpt-000050', 'ckpt-000100', 'latest']",
        'ckpt-000100',
        "['ckpt-000150', 'ckpt-000200', 'latest']",
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
