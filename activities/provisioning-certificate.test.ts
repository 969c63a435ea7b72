/**
 * The fleet's supervisor CA on the worker: certificates issued from a CA made by `openssl` pass `openssl verify`
 * for the name they are issued for (RSA and EC CAs), and every setting that cannot work stops the worker at
 * start naming its variable.
 */
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { chmodSync, copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../schemas/env';
import { createTestPki, type TestPki } from '../test/support/pki';
import { loadSupervisorCertificateIssuer } from './provisioning-certificate';

let pki: TestPki;
let caKey: string;
beforeAll(() => {
  pki = createTestPki();
  caKey = path.join(pki.dir, 'ca.key');
  chmodSync(caKey, 0o600);
});

const NOW = new Date();
/** `openssl verify` of `certPem` against `caFile` as a TLS server for `name`; its output, or the failure's. */
function opensslVerify(caFile: string, certPem: string, name: string): string {
  const file = path.join(pki.dir, `leaf-${name}.pem`);
  writeFileSync(file, certPem);
  try {
    const args = ['verify', '-CAfile', caFile, '-purpose', 'sslserver', '-verify_hostname', name];
    return execFileSync('openssl', [...args, file], { stdio: 'pipe' }).toString();
  } catch (err) {
    const { stdout, stderr } = err as { stdout?: Buffer; stderr?: Buffer };
    return `${stdout?.toString() ?? ''}${stderr?.toString() ?? ''}`;
  }
}

it('issues a server certificate for the name, from the CA, that openssl verifies (an RSA CA)', () => {
  const issuer = loadSupervisorCertificateIssuer({
    HARU_SUPERVISOR_CA_FILE: pki.ca,
    HARU_SUPERVISOR_CA_KEY_FILE: caKey,
  })!;
  const issued = issuer.issue('aws-use1.gpu.example.com', NOW);
  expect(opensslVerify(pki.ca, issued.certPem, 'aws-use1.gpu.example.com')).toMatch(/: OK$/m);
  expect(opensslVerify(pki.ca, issued.certPem, 'gcp-usc1.gpu.example.com')).toMatch(/hostname mismatch/);
  expect(opensslVerify(pki.otherCa, issued.certPem, 'aws-use1.gpu.example.com')).toMatch(/unable to get local issuer/);
  const cert = new X509Certificate(issued.certPem);
  expect(cert.ca).toBe(false);
  expect(cert.subjectAltName).toBe('DNS:aws-use1.gpu.example.com');
  expect(cert.serialNumber).toBe(issued.serial);
  // Valid from a few minutes before now (a host's clock behind the worker's), at most as long as the CA.
  expect(new Date(cert.validFrom).getTime()).toBe(Math.floor((NOW.getTime() - 5 * 60_000) / 1000) * 1000);
  expect(issued.notAfter).toEqual(new Date(cert.validTo));
  // A fresh key each time, and never the same serial.
  const again = issuer.issue('aws-use1.gpu.example.com', NOW);
  expect(again.keyPem).not.toBe(issued.keyPem);
  expect(again.serial).not.toBe(issued.serial);
});

it('issues from an EC CA too, no later than the CA itself expires', () => {
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-keyout', 'ec-ca.key', '-out', 'ec-ca.pem', '-days', '2', '-subj', '/CN=haru EC CA'], { cwd: pki.dir, stdio: 'pipe' }); // prettier-ignore
  const key = path.join(pki.dir, 'ec-ca.key');
  chmodSync(key, 0o600);
  const caFile = path.join(pki.dir, 'ec-ca.pem');
  const issuer = loadSupervisorCertificateIssuer({
    HARU_SUPERVISOR_CA_FILE: caFile,
    HARU_SUPERVISOR_CA_KEY_FILE: key,
  })!;
  const issued = issuer.issue('host.example', new Date());
  writeFileSync(path.join(pki.dir, 'ec-leaf.pem'), issued.certPem);
  const out = execFileSync(
    'openssl',
    ['verify', '-CAfile', caFile, '-verify_hostname', 'host.example', 'ec-leaf.pem'],
    {
      cwd: pki.dir,
    },
  ).toString();
  expect(out).toMatch(/: OK$/m);
  expect(issued.notAfter.getTime()).toBe(Date.parse(new X509Certificate(readFileSync(caFile)).validTo));
});

it('is off without HARU_SUPERVISOR_CA_KEY_FILE, and refuses at start what cannot issue, naming the variable', () => {
  expect(loadSupervisorCertificateIssuer({ HARU_SUPERVISOR_CA_FILE: pki.ca })).toBeUndefined();
  const load = (env: Parameters<typeof loadSupervisorCertificateIssuer>[0]) => () =>
    loadSupervisorCertificateIssuer(env);
  expect(load({ HARU_SUPERVISOR_CA_KEY_FILE: caKey })).toThrow(
    new ConfigError('HARU_SUPERVISOR_CA_KEY_FILE needs HARU_SUPERVISOR_CA_FILE, the certificate of that CA'),
  );
  expect(load({ HARU_SUPERVISOR_CA_FILE: '/nope.pem', HARU_SUPERVISOR_CA_KEY_FILE: caKey })).toThrow(
    /^HARU_SUPERVISOR_CA_FILE: cannot read \/nope\.pem \(ENOENT\)$/,
  );
  expect(load({ HARU_SUPERVISOR_CA_FILE: pki.server.cert, HARU_SUPERVISOR_CA_KEY_FILE: caKey })).toThrow(
    /^HARU_SUPERVISOR_CA_FILE: .*server\.pem is not a CA certificate/,
  );
  const loose = path.join(pki.dir, 'loose-ca.key');
  copyFileSync(caKey, loose);
  chmodSync(loose, 0o640);
  expect(load({ HARU_SUPERVISOR_CA_FILE: pki.ca, HARU_SUPERVISOR_CA_KEY_FILE: loose })).toThrow(
    /^HARU_SUPERVISOR_CA_KEY_FILE: .*loose-ca\.key is open to group or others \(mode 0640\); chmod 600 it$/,
  );
  const otherKey = path.join(pki.dir, 'other-ca.key');
  chmodSync(otherKey, 0o600);
  expect(load({ HARU_SUPERVISOR_CA_FILE: pki.ca, HARU_SUPERVISOR_CA_KEY_FILE: otherKey })).toThrow(
    /^HARU_SUPERVISOR_CA_KEY_FILE: .*other-ca\.key is not the key of the CA in .*ca\.pem$/,
  );
  const notKey = path.join(pki.dir, 'not-a-key');
  writeFileSync(notKey, 'hello', { mode: 0o600 });
  expect(load({ HARU_SUPERVISOR_CA_FILE: pki.ca, HARU_SUPERVISOR_CA_KEY_FILE: notKey })).toThrow(
    /is not a PEM private key/,
  );
});
