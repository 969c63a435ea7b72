import { ConfigError } from '../schemas/env';
import { supervisorConfigSchema } from '../schemas/supervisor';
import {
  apiKeyEnvNames,
  loadSupervisorConfig,
  loadSupervisorEnv,
  resolveListenHost,
  resolveVllmApiKeys,
  supervisorConfigOf,
} from './config';

const valid = {
  inference: [{ gpuIndex: 0, models: [{ name: 'small-a', port: 8001 }], sleepLevel: 1 }],
  training: [{ gpuIndex: 0, command: ['python', 'train.py'], checkpointDir: '/data/ckpt' }],
};
const noFile = (file: string): string => {
  throw new Error(`ENOENT: ${file}`);
};

describe('supervisor config', () => {
  it('reads inline JSON and a file path', () => {
    expect(loadSupervisorConfig(JSON.stringify(valid), noFile).inference[0]!.models[0]!.name).toBe('small-a');
    const fromFile = loadSupervisorConfig('/etc/haru/supervisor.json', (file) => {
      expect(file).toBe('/etc/haru/supervisor.json');
      return JSON.stringify({ inference: [{ gpuIndex: 1, models: [{ name: 'big', port: 8002 }] }] });
    });
    expect(fromFile).toEqual({
      inference: [{ gpuIndex: 1, models: [{ name: 'big', port: 8002 }], sleepLevel: 1 }],
      training: [],
    });
  });

  it('lists every problem of a bad config at once', () => {
    const bad = {
      inference: [
        { gpuIndex: 0, models: [{ name: 'dup', port: 8001 }], sleepLevel: 3 },
        { gpuIndex: 0, models: [{ name: 'dup', port: 8001 }] },
      ],
      training: [
        { gpuIndex: 1, command: [], checkpointDir: '/c' },
        { gpuIndex: 1, command: ['x'], checkpointDir: '/c', extra: true },
      ],
    };
    let error: unknown;
    try {
      loadSupervisorConfig(JSON.stringify(bad), noFile);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    for (const expected of ['inference.0.sleepLevel', 'training.0.command', 'training.1: Unrecognized key: "extra"']) {
      expect(message).toContain(expected);
    }
  });

  it('reports duplicate model names, ports and (gpu, kind) pairs', () => {
    const dup = {
      inference: [
        { gpuIndex: 0, models: [{ name: 'a', port: 8001 }] },
        { gpuIndex: 0, models: [{ name: 'a', port: 8001 }] },
      ],
      training: [
        { gpuIndex: 2, command: ['x'], checkpointDir: '/c' },
        { gpuIndex: 2, command: ['y'], checkpointDir: '/d' },
      ],
    };
    expect(() => loadSupervisorConfig(JSON.stringify(dup), noFile)).toThrow(
      /GPU 0 already has an inference slot[\s\S]*duplicate model name "a"[\s\S]*port 8001 is used twice[\s\S]*GPU 2 already has a training slot/,
    );
  });

  it('names the source of unreadable or non-JSON config', () => {
    expect(() => loadSupervisorConfig('/missing.json', noFile)).toThrow(/cannot read supervisor config \/missing.json/);
    expect(() => loadSupervisorConfig('{ nope', noFile)).toThrow(/inline JSON\) is not valid JSON/);
  });

  it('parses the environment with defaults and lists bad variables', () => {
    const env = loadSupervisorEnv({ HARU_SUPERVISOR_CONFIG: '{}', HARU_SUPERVISOR_TOKEN: '' });
    expect(env).toMatchObject({ PORT: 8701, HARU_GPU_VENDOR: 'nvidia' });
    expect(env.HARU_SUPERVISOR_TOKEN).toBeUndefined(); // blank counts as unset
    expect(() => loadSupervisorEnv({ PORT: 'x', HARU_GPU_VENDOR: 'intel' })).toThrow(
      /HARU_SUPERVISOR_CONFIG: is required[\s\S]*PORT[\s\S]*HARU_GPU_VENDOR/,
    );
  });

  it('reads the tokens from their _FILE variables, trimmed, and names a bad one', () => {
    const files: Record<string, string> = { '/run/token': 'from-file\n', '/run/previous': ' old\r\n' };
    const read = (file: string) => files[file] ?? noFile(file);
    const env = loadSupervisorEnv(
      {
        HARU_SUPERVISOR_CONFIG: '{}',
        HARU_SUPERVISOR_TOKEN_FILE: '/run/token',
        HARU_SUPERVISOR_TOKEN_PREVIOUS_FILE: '/run/previous',
      },
      read,
    );
    expect(env).toMatchObject({ HARU_SUPERVISOR_TOKEN: 'from-file', HARU_SUPERVISOR_TOKEN_PREVIOUS: 'old' });
    expect(
      loadSupervisorEnv({ HARU_SUPERVISOR_CONFIG: '{}', HARU_SUPERVISOR_TOKEN: ' t \n' }).HARU_SUPERVISOR_TOKEN,
    ).toBe('t');
    const both = { HARU_SUPERVISOR_CONFIG: '{}', HARU_SUPERVISOR_TOKEN: 't', HARU_SUPERVISOR_TOKEN_FILE: '/run/token' };
    expect(() => loadSupervisorEnv(both, read)).toThrow(ConfigError);
    expect(() => loadSupervisorEnv(both, read)).toThrow(
      /HARU_SUPERVISOR_TOKEN and HARU_SUPERVISOR_TOKEN_FILE are both set/,
    );
    expect(() =>
      loadSupervisorEnv({ HARU_SUPERVISOR_CONFIG: '{}', HARU_SUPERVISOR_TOKEN_FILE: '/gone' }, read),
    ).toThrow(/^HARU_SUPERVISOR_TOKEN_FILE: cannot read \/gone/);
  });

  it('listens on loopback only without a token and refuses a public host then', () => {
    expect(resolveListenHost({ HARU_SUPERVISOR_TOKEN: undefined, HARU_SUPERVISOR_HOST: undefined })).toBe('127.0.0.1');
    expect(resolveListenHost({ HARU_SUPERVISOR_TOKEN: 't', HARU_SUPERVISOR_HOST: undefined })).toBe('0.0.0.0');
    expect(resolveListenHost({ HARU_SUPERVISOR_TOKEN: undefined, HARU_SUPERVISOR_HOST: '::1' })).toBe('::1');
    expect(() => resolveListenHost({ HARU_SUPERVISOR_TOKEN: undefined, HARU_SUPERVISOR_HOST: '0.0.0.0' })).toThrow(
      ConfigError,
    );
  });
});

describe('the host-wide trainer user (HARU_TRAINING_RUN_AS)', () => {
  const twoSlots = JSON.stringify({
    training: [
      { gpuIndex: 0, command: ['python', 'train.py'], checkpointDir: '/data/a' },
      { gpuIndex: 1, command: ['python', 'train.py'], checkpointDir: '/data/b', runAs: 'alice' },
    ],
  });
  it("runs every slot without a runAs of its own as that user; a slot's own wins; unset, nothing changes", () => {
    const users = (runAs?: string) =>
      supervisorConfigOf({ HARU_SUPERVISOR_CONFIG: twoSlots, HARU_TRAINING_RUN_AS: runAs }, noFile).training.map(
        (t) => t.runAs,
      );
    expect(users('haru-trainer')).toEqual(['haru-trainer', 'alice']);
    expect(users(undefined)).toEqual([undefined, 'alice']);
  });

  it('is read as a user name, blank as unset', () => {
    const env = (value: string) => ({ HARU_SUPERVISOR_CONFIG: twoSlots, HARU_TRAINING_RUN_AS: value });
    expect(loadSupervisorEnv(env('haru-trainer')).HARU_TRAINING_RUN_AS).toBe('haru-trainer');
    expect(loadSupervisorEnv(env('')).HARU_TRAINING_RUN_AS).toBeUndefined();
    expect(() => loadSupervisorEnv(env('root; rm -rf /'))).toThrow(/HARU_TRAINING_RUN_AS: must be a user name/);
  });
});

describe('resolveVllmApiKeys', () => {
  const config = (apiKey: unknown) =>
    supervisorConfigSchema.parse({ inference: [{ gpuIndex: 0, models: [{ name: 'm', port: 8001, apiKey }] }] });

  it('reads a key from the named variable or file, by port, and names the variables to keep from trainers', () => {
    expect(resolveVllmApiKeys(config({ env: 'K' }), { K: ' s3cret ' }, () => '')).toEqual(new Map([[8001, 's3cret']]));
    expect(resolveVllmApiKeys(config({ file: '/k' }), {}, () => 'filekey\n')).toEqual(new Map([[8001, 'filekey']]));
    expect(apiKeyEnvNames(config({ env: 'K' }))).toEqual(['K']);
    expect(resolveVllmApiKeys(supervisorConfigSchema.parse({}), {}, () => '').size).toBe(0);
  });

  it('refuses an unset variable, an unreadable or empty file, and a key written in clear', () => {
    expect(() => resolveVllmApiKeys(config({ env: 'K' }), {}, () => '')).toThrow(
      'model m: apiKey names K, which is not set',
    );
    expect(() =>
      resolveVllmApiKeys(config({ file: '/k' }), {}, () => {
        throw new Error('ENOENT');
      }),
    ).toThrow('model m: cannot read apiKey file /k: ENOENT');
    expect(() => resolveVllmApiKeys(config({ file: '/k' }), {}, () => ' ')).toThrow('apiKey file /k is empty');
    expect(
      supervisorConfigSchema.safeParse({
        inference: [{ gpuIndex: 0, models: [{ name: 'm', port: 1, apiKey: 'clear' }] }],
      }).success,
    ).toBe(false);
  });
});
