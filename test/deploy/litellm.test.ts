/**
 * LiteLLM in front of Haru's proxy, as deploy/litellm/config.yaml ships it: a real LiteLLM proxy (its pinned
 * version, in a virtualenv under .haru/venvs, test/support/python-tools.ts) started on that file, with only
 * the model name, Haru's address and the fleet filled in, in front of a running API (which takes inference only
 * with an `inference` key, given to LiteLLM the way the file reads it), worker and simulated fleet. Clients send
 * through LiteLLM with the OpenAI SDK, streaming and not, retries off in the SDK and in LiteLLM; the active's
 * host is SIGKILLed and the monitor fails over: no client sees an error, and answers come from the new active,
 * as LiteLLM relays Haru's x-haru-domain.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { parse, stringify } from 'yaml';
import { tokenDigest } from '../../lib/bearer-auth';
import { monitorWorkflowId } from '../../workflows/definitions';
import { type ChaosApi, startChaosApi } from '../chaos/support/api';
import { killAndFailOver, untilViableStandby } from '../chaos/support/failover-again';
import { type ChaosRig, startChaosRig } from '../chaos/support/rig';
import { ROOT } from '../dev/support';
import { eventually } from '../support/eventually';
import { freePort } from '../support/ports';
import { ensurePythonTool, LITELLM } from '../support/python-tools';
import { MODEL } from '../workflows/support/sim-fleet';
import { uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';

jest.setTimeout(420_000);

/** LiteLLM's `litellm` command (its venv made on first use); or why there is none. */
function litellmCommand(): { bin: string } | { why: string } {
  try {
    return { bin: path.join(ensurePythonTool(LITELLM), 'bin', 'litellm') };
  } catch (err) {
    return { why: (err as Error).message };
  }
}
const found = litellmCommand();
if ('why' in found) process.stderr.write(`\nSKIPPED: LiteLLM recipe not run: ${found.why}\n\n`);
const describeWithLitellm = 'bin' in found ? describe : describe.skip;

interface LitellmConfig {
  model_list: { model_name: string; litellm_params: Record<string, unknown> & { extra_headers: object } }[];
  router_settings: Record<string, unknown>;
  general_settings: Record<string, unknown>;
}

/** One answer a client got through LiteLLM: the domain Haru says served it, or the error. */
type Answer = { at: number; stream: boolean; domain: string | null; content: string } | { at: number; error: string };

describeWithLitellm('LiteLLM in front of Haru (deploy/litellm/config.yaml)', () => {
  let dir: string;
  let rig: ChaosRig | undefined;
  let api: ChaosApi | undefined;
  let litellm: ChildProcess | undefined;
  let litellmLog = '';
  /** While true the clients keep sending; a failed test stops them too. */
  let sending = false;
  const server = useTestServer(async () => {
    sending = false;
    litellm?.kill('SIGKILL');
    await api?.close();
    await rig?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('serves through a killed active with no client error, answering from the new active', async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'haru-litellm-'));
    const taskQueue = uniqueTaskQueue('litellm');
    rig = await startChaosRig({
      temporal: server,
      temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
      taskQueue,
      policy: { autoFailover: true },
    });
    const { fleet } = rig;
    // The API takes inference from a key with that scope alone: the one the recipe's api_key variable holds.
    const inferenceKey = `sk-haru-${randomBytes(16).toString('hex')}`;
    api = await startChaosApi({
      databaseUrl: fleet.db.url,
      temporalAddress: rig.temporalAddress,
      taskQueue,
      config: { apiKeys: [{ name: 'litellm', digest: tokenDigest(inferenceKey), scopes: ['inference'] }] },
    });
    await rig.startWorker();

    // The shipped file, with this fleet's model and slug where an operator writes theirs; nothing else changed.
    const shipped = parse(readFileSync(path.join(ROOT, 'deploy/litellm/config.yaml'), 'utf8')) as LitellmConfig;
    expect(shipped.model_list).toHaveLength(1);
    const [entry] = shipped.model_list;
    expect(Object.keys(entry!.litellm_params.extra_headers)).toEqual(['X-Haru-Fleet']);
    const keyVariable = /^os\.environ\/(\w+)$/.exec(String(entry!.litellm_params.api_key))?.[1];
    if (!keyVariable) throw new Error('deploy/litellm/config.yaml does not read api_key from the environment');
    const config: LitellmConfig = {
      ...shipped,
      model_list: [
        {
          model_name: MODEL,
          litellm_params: {
            ...entry!.litellm_params,
            model: `openai/${MODEL}`,
            api_base: `${api.url}/v1`,
            // The fleet in the header the file names.
            extra_headers: Object.fromEntries(
              Object.keys(entry!.litellm_params.extra_headers).map((name) => [name, fleet.layout.fleet.slug]),
            ),
          },
        },
      ],
    };
    const configFile = path.join(dir, 'config.yaml');
    writeFileSync(configFile, stringify(config));
    const port = await freePort();
    const masterKey = `sk-${randomBytes(16).toString('hex')}`;
    litellm = spawn(
      (found as { bin: string }).bin,
      ['--config', configFile, '--host', '127.0.0.1', '--port', String(port)],
      {
        cwd: dir,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: {
          PATH: process.env.PATH,
          HOME: dir,
          // The variable the file reads Haru's key from.
          [keyVariable]: inferenceKey,
          LITELLM_MASTER_KEY: masterKey,
          // Its price list from the package, not from the network.
          LITELLM_LOCAL_MODEL_COST_MAP: 'True',
        },
      },
    );
    litellm.stdout!.on('data', (c: Buffer) => (litellmLog += c.toString()));
    litellm.stderr!.on('data', (c: Buffer) => (litellmLog += c.toString()));
    const base = `http://127.0.0.1:${port}`;
    await eventually(
      'LiteLLM to start',
      async () => {
        if (litellm!.exitCode !== null) throw new Error(`LiteLLM exited (${litellm!.exitCode}):\n${litellmLog}`);
        return (await fetch(`${base}/health/liveliness`).catch(() => null))?.ok;
      },
      120_000,
      250,
    );

    const monitor = server.client.workflow.getHandle(monitorWorkflowId(fleet.fleetId));
    await untilViableStandby(monitor, fleet.west);

    // Four clients, every other request streamed; neither the SDK nor LiteLLM retries (config: num_retries 0).
    const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: masterKey, maxRetries: 0 });
    const answers: Answer[] = [];
    const ask = async (stream: boolean): Promise<Answer> => {
      const messages = [{ role: 'user' as const, content: 'hi' }];
      if (!stream) {
        const { data, response } = await openai.chat.completions
          .create({ model: MODEL, messages, max_tokens: 4 })
          .withResponse();
        const domain = response.headers.get('llm_provider-x-haru-domain');
        return { at: Date.now(), stream, domain, content: data.choices[0]?.message.content ?? '' };
      }
      const { data, response } = await openai.chat.completions
        .create({ model: MODEL, messages, max_tokens: 4, stream: true })
        .withResponse();
      let content = '';
      for await (const chunk of data) content += chunk.choices[0]?.delta.content ?? '';
      return { at: Date.now(), stream, domain: response.headers.get('llm_provider-x-haru-domain'), content };
    };
    sending = true;
    const clients = Array.from({ length: 4 }, async (_, i) => {
      for (let n = i; sending; n += 1)
        answers.push(await ask(n % 2 === 1).catch((err: Error) => ({ at: Date.now(), error: err.message })));
    });
    const from = (domain: string, after = 0) =>
      answers.filter((a) => 'domain' in a && a.domain === domain && a.at > after);
    await eventually('answers from east through LiteLLM', () => from('east').length >= 10, 60_000, 50);

    await killAndFailOver(fleet, fleet.east, fleet.west);
    const movedAt = Date.now();
    await eventually('answers from west after the failover', () => from('west', movedAt).length >= 10, 120_000, 50);
    sending = false;
    await Promise.all(clients);

    expect(answers.filter((a) => 'error' in a)).toEqual([]);
    expect(answers.filter((a) => 'domain' in a && (a.domain === null || a.content === ''))).toEqual([]);
    // Both kinds of request went through on both sides of the failover.
    for (const domain of ['east', 'west'])
      expect(new Set(from(domain).map((a) => ('stream' in a ? a.stream : null)))).toEqual(new Set([false, true]));
    // No answer from east once routing had moved and its host was dead.
    expect(answers.filter((a) => 'domain' in a && a.domain === 'east' && a.at > movedAt + 1_000)).toEqual([]);
  });
});
