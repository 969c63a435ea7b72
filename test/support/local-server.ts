import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

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
