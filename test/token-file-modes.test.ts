/**
 * Every process that takes a bearer token from a file refuses one that group or others may read, with the one
 * check of lib/secret-file.ts: the supervisor's HARU_SUPERVISOR_TOKEN_FILE, the API's HARU_API_TOKEN_FILE, the
 * worker's HARU_SUPERVISOR_TOKEN_FILE and a layout's per-domain `supervisor.tokenFile`. Real files, real modes.
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadApiConfig } from '../api/config';
import { createSupervisorAccess } from '../clients/supervisor-access';
import { ConfigError } from '../schemas/env';
import { loadSupervisorEnv } from '../supervisor/config';
import { loadWorkerConfig } from '../workers/config';

const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-token-modes-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A token file of `mode`, set with chmod (the umask does not decide it). */
function tokenFile(name: string, mode: number): string {
  const file = path.join(dir, name);
  writeFileSync(file, 'tok-3f9a\n');
  chmodSync(file, mode);
  return file;
}

const READERS: [string, string, (file: string) => string | undefined][] = [
  [
    'the supervisor',
    'HARU_SUPERVISOR_TOKEN_FILE',
    (file) =>
      loadSupervisorEnv({ HARU_SUPERVISOR_CONFIG: '{}', HARU_SUPERVISOR_TOKEN_FILE: file }).HARU_SUPERVISOR_TOKEN,
  ],
  [
    'the supervisor (previous token)',
    'HARU_SUPERVISOR_TOKEN_PREVIOUS_FILE',
    (file) =>
      loadSupervisorEnv({ HARU_SUPERVISOR_CONFIG: '{}', HARU_SUPERVISOR_TOKEN_PREVIOUS_FILE: file })
        .HARU_SUPERVISOR_TOKEN_PREVIOUS,
  ],
  ['the API', 'HARU_API_TOKEN_FILE', (file) => loadApiConfig({ HARU_API_TOKEN_FILE: file }).HARU_API_TOKEN],
  [
    'the worker',
    'HARU_SUPERVISOR_TOKEN_FILE',
    (file) => loadWorkerConfig({ HARU_SUPERVISOR_TOKEN_FILE: file }).HARU_SUPERVISOR_TOKEN,
  ],
  [
    'the worker, for a domain',
    'domain east: supervisor.tokenFile',
    (file) =>
      createSupervisorAccess({ env: { HARU_SECRETS_DIR: dir } }).tokenFor({
        slug: 'east',
        supervisorUrl: 'http://127.0.0.1:8701',
        supervisor: { tokenFile: file },
      }),
  ],
];

describe.each(READERS)('%s', (_who, setting, read) => {
  it.each(['0644', '0640', '0604'])(
    `refuses a token file of mode %s, naming ${setting}, the file and the mode`,
    (octal) => {
      const file = tokenFile(`loose-${octal}-${setting.replace(/\W/g, '_')}`, parseInt(octal, 8));
      let error: unknown;
      try {
        read(file);
      } catch (err) {
        error = err;
      }
      expect(error).toBeInstanceOf(Error);
      expect((error as Error).message).toContain(`${setting}: ${file} is open to group or others (mode ${octal})`);
    },
  );

  it('reads one its owner alone may read', () => {
    expect(read(tokenFile(`owner-${setting.replace(/\W/g, '_')}`, 0o600))).toBe('tok-3f9a');
  });
});

it('stops the supervisor with a ConfigError, which exits 2 at start', () => {
  const file = tokenFile('supervisor-config-error', 0o644);
  expect(() => loadSupervisorEnv({ HARU_SUPERVISOR_CONFIG: '{}', HARU_SUPERVISOR_TOKEN_FILE: file })).toThrow(
    ConfigError,
  );
});
