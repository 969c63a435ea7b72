/**
 * Runs one fake vLLM as its own process (what `startSimDomain` spawns):
 *   node -r tsx/cjs sim/vllm/main.ts --model NAME --port N --gpu-index N [--host ADDR]
 *     [--gpu-state DIR] [--control FILE] [--wake-delay-ms N] [--tokens-per-second N]
 *     [--weights-mib N] [--kv-cache-mib N] [--residue-mib N] [--start-asleep] [--api-key KEY]
 *     [--lora-module NAME=PATH]... [--max-num-seqs N] [--sleep-delay-ms N] [--first-sleep-delay-ms N]
 *     [--vllm-version V]
 * Prints one JSON line `{"event":"listening",...}` when ready; exits 0 on SIGTERM/SIGINT.
 */
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { blankable, parseEnv } from '../../schemas/env';
import { createFakeVllm } from './server';

/** The one variable a fake vLLM reads, as `vllm serve` does: the key `--api-key` gives when it is absent. */
export const fakeVllmEnvSchema = z.object({
  VLLM_API_KEY: blankable(z.string().min(1).optional()),
});

export async function runFakeVllm(argv: string[], env: NodeJS.ProcessEnv = {}): Promise<void> {
  const settings = parseEnv(fakeVllmEnvSchema, env, 'fake vLLM');
  const { values } = parseArgs({
    args: argv,
    options: {
      model: { type: 'string' },
      port: { type: 'string' },
      host: { type: 'string', default: '127.0.0.1' },
      'gpu-index': { type: 'string', default: '0' },
      'gpu-state': { type: 'string' },
      control: { type: 'string' },
      'wake-delay-ms': { type: 'string' },
      'tokens-per-second': { type: 'string' },
      'weights-mib': { type: 'string' },
      'kv-cache-mib': { type: 'string' },
      'residue-mib': { type: 'string' },
      'start-asleep': { type: 'boolean', default: false },
      'api-key': { type: 'string' },
      'lora-module': { type: 'string', multiple: true },
      'max-num-seqs': { type: 'string' },
      'sleep-delay-ms': { type: 'string' },
      'first-sleep-delay-ms': { type: 'string' },
      'vllm-version': { type: 'string' },
    },
  });
  if (!values.model || values.port === undefined) throw new Error('--model and --port are required');
  const num = (v: string | undefined) => (v === undefined ? undefined : Number(v));
  const fake = createFakeVllm({
    model: values.model,
    port: Number(values.port),
    host: values.host,
    gpuIndex: Number(values['gpu-index']),
    gpuStateDir: values['gpu-state'],
    controlFile: values.control,
    wakeDelayMs: num(values['wake-delay-ms']),
    tokensPerSecond: num(values['tokens-per-second']),
    weightsMiB: num(values['weights-mib']),
    kvCacheMiB: num(values['kv-cache-mib']),
    residueMiB: num(values['residue-mib']),
    startAsleep: values['start-asleep'],
    loraModules: (values['lora-module'] ?? []).map((spec) => {
      const [name, ...rest] = spec.split('=');
      return { name: name!, path: rest.join('=') || name! };
    }),
    // As `vllm serve`: --api-key, else VLLM_API_KEY.
    apiKey: values['api-key'] ?? settings.VLLM_API_KEY,
    maxNumSeqs: num(values['max-num-seqs']),
    sleepDelayMs: num(values['sleep-delay-ms']),
    firstSleepDelayMs: num(values['first-sleep-delay-ms']),
    vllmVersion: values['vllm-version'],
    // A crash is abrupt: no cleanup, no exit handlers, exactly like an engine that died.
    onCrash: () => process.kill(process.pid, 'SIGKILL'),
  });
  const port = await fake.listen();
  process.stdout.write(`${JSON.stringify({ event: 'listening', model: values.model, port, pid: process.pid })}\n`);
  const stop = () => {
    void fake.close().then(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

if (require.main === module) {
  runFakeVllm(process.argv.slice(2), process.env).catch((err: Error) => {
    process.stderr.write(`fake vllm: ${err.message}\n`);
    process.exit(1);
  });
}
