import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createUpstreamCredentials } from './secret-ref';

const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-upstream-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('upstream credentials from a file', () => {
  it('reads a key file its owner alone may read, trimmed', () => {
    const file = path.join(dir, 'owner-only');
    writeFileSync(file, 'vllm-key\n', { mode: 0o600 });
    expect(createUpstreamCredentials({}).token({ file })).toBe('vllm-key');
  });

  it('refuses one that group or others may read, naming the file and its mode', () => {
    const file = path.join(dir, 'loose');
    writeFileSync(file, 'vllm-key\n');
    chmodSync(file, 0o644);
    expect(() => createUpstreamCredentials({}).token({ file })).toThrow(
      `${file} is open to group or others (mode 0644); chmod 600 it`,
    );
  });
});
