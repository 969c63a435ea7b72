import { readFileSync, unwatchFile, watchFile } from 'node:fs';
import type { Server } from 'node:tls';
import { readOwnerOnlyFile } from './secret-file';

/** A server's certificate and key files, each with the setting that names it (every error names it). */
export interface ServerCertificateFiles {
  cert: { setting: string; file: string };
  key: { setting: string; file: string };
}

/** The certificate chain and key, read now; the key file must be its owner's alone (lib/secret-file.ts). */
export function readServerCertificate(
  files: ServerCertificateFiles,
  fail: (message: string) => Error,
): { cert: Buffer; key: Buffer } {
  let cert: Buffer;
  try {
    cert = readFileSync(files.cert.file);
  } catch (err) {
    throw fail(`${files.cert.setting}: cannot read ${files.cert.file} (${(err as NodeJS.ErrnoException).code})`);
  }
  return { cert, key: readOwnerOnlyFile(files.key.file, files.key.setting, fail) };
}

/**
 * How often the files are looked at for a change (their stat: a renewed certificate, a Kubernetes secret's
 * symlink swapped, cert-manager's or certbot's renewal). A renewal is days ahead of expiry, so seconds are
 * plenty.
 */
export const CERTIFICATE_CHECK_MS = 5_000;

/**
 * Serves a renewed certificate without a restart: when either file changes, both are read again and put in
 * force for new connections (`setSecureContext`); connections open keep theirs. A pair that does not load (a
 * key that does not match its certificate while one of the two is still being written) leaves the one in force
 * and is tried again at the next change. Returns the function that stops watching.
 */
export function reloadCertificateOnChange(
  server: Server,
  files: ServerCertificateFiles,
  report: { reloaded(): void; failed(message: string): void },
  checkMs = CERTIFICATE_CHECK_MS,
): () => void {
  const reload = () => {
    try {
      server.setSecureContext(readServerCertificate(files, (m) => new Error(m)));
      report.reloaded();
    } catch (err) {
      report.failed((err as Error).message);
    }
  };
  const paths = [files.cert.file, files.key.file];
  for (const file of paths) watchFile(file, { interval: checkMs, persistent: false }, reload);
  return () => {
    for (const file of paths) unwatchFile(file, reload);
  };
}
