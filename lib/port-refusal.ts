import net from 'node:net';

/**
 * Whether nothing listens at `url`'s host and port: a TCP connect answered with a refusal or a reset (the host's
 * kernel speaking for a dead process), as opposed to a connection made (something listens) or silence (no
 * answer within `timeoutMs`: the network or a frozen host, which proves nothing). Opens no HTTP exchange: the
 * connection, if made, is closed at once.
 */
export function isPortRefused(url: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
  let host: string;
  let port: number;
  try {
    const u = new URL(url);
    host = u.hostname.replace(/^\[|\]$/g, '');
    port = Number(u.port || (u.protocol === 'https:' ? 443 : 80));
  } catch {
    return Promise.resolve(false);
  }
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (refused: boolean) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      socket.destroy();
      resolve(refused);
    };
    const onAbort = () => done(false);
    const timer = setTimeout(() => done(false), timeoutMs);
    signal?.addEventListener('abort', onAbort, { once: true });
    socket.once('connect', () => done(false));
    socket.once('error', (err: NodeJS.ErrnoException) =>
      done(err.code === 'ECONNREFUSED' || err.code === 'ECONNRESET'),
    );
  });
}
