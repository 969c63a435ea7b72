import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** A certificate and its key, as files. */
export interface CertFiles {
  cert: string;
  key: string;
}

/** A test CA with a server certificate (localhost, 127.0.0.1) and a client certificate, plus an unrelated CA. */
export interface TestPki {
  dir: string;
  ca: string;
  /** A CA that signed nothing here: "the wrong CA". */
  otherCa: string;
  server: CertFiles;
  client: CertFiles;
}

const openssl = (dir: string, args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });

function issue(dir: string, name: string, subject: string, ext: string): CertFiles {
  writeFileSync(path.join(dir, `${name}.ext`), `${ext}\n`);
  openssl(dir, [
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.csr`,
    '-subj',
    subject,
  ]);
  openssl(dir, [
    'x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial',
    '-out', `${name}.pem`, '-days', '2', '-extfile', `${name}.ext`,
  ]); // prettier-ignore
  return { cert: path.join(dir, `${name}.pem`), key: path.join(dir, `${name}.key`) };
}

/**
 * Generates a fresh PKI with `openssl` in a temporary directory: X.509 v3 certificates (rustls refuses v1),
 * the server one valid for `localhost` and `127.0.0.1`, the client one for client authentication.
 */
export function createTestPki(): TestPki {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-pki-'));
  const selfSigned = (name: string, cn: string) =>
    openssl(dir, ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.pem`,
      '-days', '2', '-subj', `/CN=${cn}`]); // prettier-ignore
  selfSigned('ca', 'haru test CA');
  selfSigned('other-ca', 'unrelated CA');
  const server = issue(dir, 'server', '/CN=localhost', 'subjectAltName=DNS:localhost,IP:127.0.0.1');
  const client = issue(dir, 'client', '/CN=haru-worker', 'extendedKeyUsage=clientAuth');
  return { dir, ca: path.join(dir, 'ca.pem'), otherCa: path.join(dir, 'other-ca.pem'), server, client };
}
