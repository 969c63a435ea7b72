import { supportsSleepWaitMode } from './vllm-version';

describe('supportsSleepWaitMode', () => {
  it.each([
    ['0.17.0', true],
    ['0.17.1+cu128', true],
    ['0.18.0rc1', true],
    ['1.0.0', true],
    ['v0.17.0', true],
    ['0.16.1.dev42+g1234', false],
    ['0.16.0', false],
    ['0.11.0+haru.sim', false],
    ['0.9', false],
    ['', false],
    ['unknown', false],
    [null, false],
  ])('%s -> %s', (version, expected) => {
    expect(supportsSleepWaitMode(version)).toBe(expected);
  });
});
