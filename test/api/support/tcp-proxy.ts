import net from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * A TCP relay in front of a real server (Postgres here) that a test can turn into an outage: `blackhole()`
 * freezes every open connection and leaves new ones unanswered, the way a partitioned network does;
 * `restore()` resets the frozen connections (their protocol state is lost, as after a long partition) and
 * lets new connections through again.
 */
export interface TcpProxy {
  port: number;
  blackhole(): void;
  restore(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  let dark = false;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => {});
    if (dark) return; // accepted, never answered
    const upstream = net.connect(targetPort, targetHost);
    sockets.add(upstream);
    upstream.on('close', () => sockets.delete(upstream));
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.on('data', (chunk) => {
      if (!dark) upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (!dark) client.write(chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    blackhole() {
      dark = true;
    },
    restore() {
      dark = false;
      for (const socket of sockets) socket.destroy();
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
