import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { readSecretFile, SecretFileError, secretFromEnv } from './secret-file';

const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-secret-'));
const file = (name: string, text: string) => {
  const at = path.join(dir, name);
  writeFileSync(at, text);
  return at;
};

describe('secret files', () => {
  it('drops the trailing newline (and surrounding whitespace) of a secret file', () => {
    expect(readSecretFile(file('token', 's3cret\n'), 'X_FILE')).toBe('s3cret');
    expect(readSecretFile(file('crlf', '  s3cret\r\n'), 'X_FILE')).toBe('s3cret');
  });

  it('refuses a missing or blank file with the setting and the path in the message', () => {
    expect(() => readSecretFile(path.join(dir, 'nope'), 'X_FILE')).toThrow(SecretFileError);
    expect(() => readSecretFile(path.join(dir, 'nope'), 'X_FILE')).toThrow(/^X_FILE: cannot read .*nope \(ENOENT\)$/);
    expect(() => readSecretFile(file('blank', '\n \n'), 'X_FILE')).toThrow(/^X_FILE: .*blank is empty$/);
  });

  it('takes NAME or NAME_FILE, trimmed, and refuses both at once', () => {
    const token = file('env-token', 'from-file\n');
    expect(secretFromEnv({ T: ' inline \n' }, 'T')).toBe('inline');
    expect(secretFromEnv({ T_FILE: token }, 'T')).toBe('from-file');
    expect(secretFromEnv({ T: '', T_FILE: ' ' }, 'T')).toBeUndefined();
    expect(() => secretFromEnv({ T: 'a', T_FILE: token }, 'T')).toThrow(/^T and T_FILE are both set/);
    expect(() => secretFromEnv({ T_FILE: '/nope' }, 'T')).toThrow(/^T_FILE: cannot read \/nope/);
  });

  it("reports a problem with the caller's own error", () => {
    class Mine extends Error {}
    const fail = (message: string) => new Mine(message);
    expect(() => secretFromEnv({ T: 'a', T_FILE: 'b' }, 'T', { fail })).toThrow(Mine);
    expect(() => readSecretFile('/nope', 'X', { fail })).toThrow(Mine);
  });
});
