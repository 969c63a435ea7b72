import { spawn } from 'node:child_process';
import http from 'node:http';
import net, { type AddressInfo, type Socket } from 'node:net';

/** An HTTP server on 127.0.0.1 at a free port. `close` ends open connections too. */
export interface LocalServer {
  url: string;
  port: number;
  server: http.Server;
  close(): Promise<void>;
}

/** Starts `handler` on 127.0.0.1:0. */
export async function listenLocal(handler: http.RequestListener): Promise<LocalServer> {
  const server = http.createServer(handler);
  const sockets = new Set<Socket>();
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A port nothing listens on (bound once, then released). */
export async function closedPort(): Promise<number> {
  const probe = await listenLocal(() => {});
  await probe.close();
  return probe.port;
}

/**
 * A host whose packets vanish, as a dead region looks from another one: a listener that never accepts, its
 * accept queue filled, so the kernel drops every further SYN (no RST). Connects to `port` stay pending until
 * the client gives up. The listener is a Python process (Node accepts every connection it can); `close` ends it.
 * `port` 0 takes a free one; a given port takes the place of a listener that just closed there.
 */
export interface SilentHost {
  url: string;
  port: number;
  close(): Promise<void>;
}

export async function startSilentHost(atPort = 0): Promise<SilentHost> {
  const listener = spawn(
    'python3',
    [
      '-c',
      'import socket, sys\n' +
        's = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n' +
        `s.bind(("127.0.0.1", ${atPort})); s.listen(0)\n` +
        'print(s.getsockname()[1], flush=True)\n' +
        'sys.stdin.read()', // until the test closes stdin: never accepts
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const port = await new Promise<number>((resolve, reject) => {
    listener.once('error', reject);
    listener.stdout.once('data', (d: Buffer) => resolve(Number(String(d).trim())));
  });
  // Fill the accept queue: connect until one connect stays pending (its SYN was dropped).
  const fillers: Socket[] = [];
  for (;;) {
    const socket = net.connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    fillers.push(socket);
    const connected = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 300);
      socket.once('connect', () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    if (!connected) break;
    if (fillers.length > 64) throw new Error('the listener kept accepting connections: no SYN was dropped');
  }
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    async close() {
      for (const socket of fillers) socket.destroy();
      const exited = new Promise((resolve) => listener.once('exit', resolve));
      listener.stdin.end();
      await exited;
    },
  };
}
