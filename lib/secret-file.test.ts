import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { readOwnerOnlyFile, readSecretFile, SecretFileError, secretFromEnv } from './secret-file';

const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-secret-'));
const file = (name: string, text: string) => {
  const at = path.join(dir, name);
  writeFileSync(at, text, { mode: 0o600 });
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

  it.each(['0640', '0604', '0644', '0660', '0602'])(
    'refuses a token file of mode %s (group or others may reach it), naming the setting, the file and the mode',
    (octal) => {
      const token = file(`loose-${octal}`, 's3cret\n');
      chmodSync(token, parseInt(octal, 8));
      const message = new RegExp(
        `^X_FILE: .*loose-${octal} is open to group or others \\(mode ${octal}\\); chmod 600 it$`,
      );
      expect(() => readSecretFile(token, 'X_FILE')).toThrow(SecretFileError);
      expect(() => readSecretFile(token, 'X_FILE')).toThrow(message);
      expect(() => secretFromEnv({ T_FILE: token }, 'T')).toThrow(/^T_FILE: .* is open to group or others/);
      expect(() => readOwnerOnlyFile(token, 'KEY_FILE')).toThrow(/^KEY_FILE: .* is open to group or others/);
    },
  );

  it('reads a token file its owner alone may read (0600, 0400)', () => {
    const token = file('owner-only', 's3cret\n');
    expect(readSecretFile(token, 'X_FILE')).toBe('s3cret');
    chmodSync(token, 0o400);
    expect(readSecretFile(token, 'X_FILE')).toBe('s3cret');
  });

  it("reports a problem with the caller's own error", () => {
    class Mine extends Error {}
    const fail = (message: string) => new Mine(message);
    expect(() => secretFromEnv({ T: 'a', T_FILE: 'b' }, 'T', { fail })).toThrow(Mine);
    expect(() => readSecretFile('/nope', 'X', { fail })).toThrow(Mine);
  });
});
