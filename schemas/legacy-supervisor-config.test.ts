import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError } from './env';
import { convertLegacySupervisorConfig, isLegacySupervisorConfig } from './legacy-supervisor-config';
import { loadSupervisorConfig } from '../supervisor/config';

const ROOT = path.resolve(__dirname, '..');
const FIXTURE = path.join(ROOT, 'test/fixtures/original/supervisor.json');
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- fixtures edited freely, as the JSON says them
const read = (file: string) => JSON.parse(readFileSync(path.resolve(ROOT, file), 'utf8')) as Record<string, any>;

describe('convertLegacySupervisorConfig', () => {
  it('puts each slot in the list of its kind, in order, without `kind`, and the supervisor loads the result', () => {
    const result = convertLegacySupervisorConfig(read(FIXTURE));
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    expect(result.document).toEqual({
      inference: [
        {
          gpuIndex: 0,
          models: [
            { name: 'chat-small', port: 9001 },
            { name: 'chat-medium', port: 9002 },
          ],
        },
        { gpuIndex: 1, models: [{ name: 'chat-large', port: 9003 }] },
      ],
      training: [
        { gpuIndex: 0, command: ['python', 'train_lora.py', '--resume'], checkpointDir: '/checkpoints/east-gpu0' },
      ],
    });
    expect(result.changes).toEqual([
      "dropped: $.$schema (it named the original's JSON Schema)",
      'moved: $.slots[0] (inference, GPU 0) -> $.inference[0], without its "kind"',
      'moved: $.slots[1] (training, GPU 0) -> $.training[0], without its "kind"',
      'moved: $.slots[2] (inference, GPU 1) -> $.inference[1], without its "kind"',
    ]);
    const loaded = loadSupervisorConfig(JSON.stringify(result.document), () => '');
    expect(loaded.inference.map((slot) => slot.sleepLevel)).toEqual([1, 1]);
  });

  it("names Haru's refusals at the slot of the original file", () => {
    const config = read(FIXTURE);
    config.slots[2].models[0].port = 9001;
    const result = convertLegacySupervisorConfig(config);
    expect(result).toEqual({
      ok: false,
      problems: [
        {
          path: '$.slots[2].models[0].port',
          message: "port 9001 is used twice ($.inference[1].models[0].port in Haru's format)",
        },
      ],
    });
  });

  it('refuses what the original refused, by path', () => {
    const config = read(FIXTURE);
    config.slots[1].kind = 'trainer';
    delete config.slots[0].models[1].port;
    const result = convertLegacySupervisorConfig(config);
    expect(result.ok).toBe(false);
    expect(!result.ok && result.problems.map((p) => p.path)).toEqual(['$.slots[0].models[1].port', '$.slots[1].kind']);
  });

  it("tells the original format from Haru's", () => {
    expect(isLegacySupervisorConfig(read(FIXTURE))).toBe(true);
    expect(isLegacySupervisorConfig(read('examples/supervisor.json'))).toBe(false);
    expect(isLegacySupervisorConfig(read('test/fixtures/original/fleet.json'))).toBe(false);
  });

  it('the supervisor refuses a config of the original format at start, pointing at the converter', () => {
    expect(() => loadSupervisorConfig(FIXTURE, (file) => readFileSync(file, 'utf8'))).toThrow(ConfigError);
    expect(() => loadSupervisorConfig(FIXTURE, (file) => readFileSync(file, 'utf8'))).toThrow(
      `\`haru layout convert ${FIXTURE} -o <new file>\``,
    );
    expect(() => loadSupervisorConfig(readFileSync(FIXTURE, 'utf8'), () => '')).toThrow(
      /inline JSON.*original project's format/,
    );
  });
});
