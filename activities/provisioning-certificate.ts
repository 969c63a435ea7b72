/**
 * The fleet's supervisor CA on the worker: the certificate every https:// supervisor is verified against
 * (HARU_SUPERVISOR_CA_FILE) and, for issuing, its key (HARU_SUPERVISOR_CA_KEY_FILE). Provisioning issues each
 * `supervisor.issueCertificate` domain a certificate for its `serverName` at every launch (docs/architecture.md §9.5).
 */
import { createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { readOwnerOnlyFile } from '../lib/secret-file';
import { issueServerCertificate, keyMatchesCertificate, type IssuedCertificate } from '../lib/x509';
import { blankable, ConfigError } from '../schemas/env';

/** The worker variables that let it issue supervisor certificates. */
export const supervisorCaEnvShape = {
  /** The private key of the CA in HARU_SUPERVISOR_CA_FILE (PEM, mode 0600): the worker issues with it. */
  HARU_SUPERVISOR_CA_KEY_FILE: blankable(z.string().min(1).optional()),
  /** How long an issued supervisor certificate is valid; provisioning the domain again issues a new one. */
  HARU_SUPERVISOR_CERT_VALIDITY_DAYS: blankable(z.coerce.number().int().min(1).max(825).default(365)),
};

export interface SupervisorCaEnv {
  HARU_SUPERVISOR_CA_FILE?: string;
  HARU_SUPERVISOR_CA_KEY_FILE?: string;
  HARU_SUPERVISOR_CERT_VALIDITY_DAYS?: number;
}

/** Issues supervisor certificates from the fleet's CA. */
export interface SupervisorCertificateIssuer {
  /** A certificate and a fresh key for `serverName`, valid from a few minutes before `now`. */
  issue(serverName: string, now: Date): IssuedCertificate;
}

/** Clocks of hosts a few minutes behind the worker's still accept a certificate issued just now. */
const CLOCK_SKEW_MS = 5 * 60_000;

/**
 * The issuer, or undefined when HARU_SUPERVISOR_CA_KEY_FILE is unset. A key without its CA certificate, an
 * unreadable file, a key file that group or others may read, a certificate that is not a CA or a key that is not
 * its own is a ConfigError naming the variable: the worker stops at start rather than at the first launch.
 */
export function loadSupervisorCertificateIssuer(env: SupervisorCaEnv): SupervisorCertificateIssuer | undefined {
  const keyFile = env.HARU_SUPERVISOR_CA_KEY_FILE;
  if (!keyFile) return undefined;
  const caFile = env.HARU_SUPERVISOR_CA_FILE;
  if (!caFile) {
    throw new ConfigError('HARU_SUPERVISOR_CA_KEY_FILE needs HARU_SUPERVISOR_CA_FILE, the certificate of that CA');
  }
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(readFileSync(caFile));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ConfigError(
      `HARU_SUPERVISOR_CA_FILE: ${code ? `cannot read ${caFile} (${code})` : `${caFile} is not a PEM certificate`}`,
    );
  }
  if (!cert.ca)
    throw new ConfigError(`HARU_SUPERVISOR_CA_FILE: ${caFile} is not a CA certificate (basicConstraints CA:TRUE)`);
  const pem = readOwnerOnlyFile(keyFile, 'HARU_SUPERVISOR_CA_KEY_FILE', (message) => new ConfigError(message));
  let key: KeyObject;
  try {
    key = createPrivateKey(pem);
  } catch {
    throw new ConfigError(
      `HARU_SUPERVISOR_CA_KEY_FILE: ${keyFile} is not a PEM private key (an encrypted one is not read)`,
    );
  }
  if (!keyMatchesCertificate(cert, key)) {
    throw new ConfigError(`HARU_SUPERVISOR_CA_KEY_FILE: ${keyFile} is not the key of the CA in ${caFile}`);
  }
  const days = env.HARU_SUPERVISOR_CERT_VALIDITY_DAYS ?? 365;
  return {
    issue(serverName, now) {
      const notAfter = new Date(Math.min(now.getTime() + days * 86_400_000, Date.parse(cert.validTo)));
      const notBefore = new Date(now.getTime() - CLOCK_SKEW_MS);
      return issueServerCertificate({ ca: { cert, key }, dnsName: serverName, notBefore, notAfter });
    },
  };
}
