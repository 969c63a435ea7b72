import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { type SilentHost, startSilentHost } from '../../support/local-server';

/**
 * A TCP relay on a fixed local port in front of a real server. `cut()` closes the listener and every open
 * connection (new connections are refused, like a host whose network is down); `restore()` listens again
 * on the same port; `goDark()` makes the port drop packets.
 */
export interface TcpRelay {
  port: number;
  url: string;
  cut(): Promise<void>;
  /**
   * Like `cut`, but the port drops packets instead of refusing them (a region gone dark): a listener that never
   * accepts takes the port, its accept queue full. `restore` brings the relay back.
   */
  goDark(): Promise<void>;
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpRelay(target: { host: string; port: number }): Promise<TcpRelay> {
  const sockets = new Set<net.Socket>();
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  };
  const createServer = () =>
    net.createServer((client) => {
      const upstream = net.connect(target.port, target.host);
      track(client);
      track(upstream);
      client.pipe(upstream);
      upstream.pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
  const listen = (server: net.Server, port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
  const shut = async (server: net.Server | null) => {
    if (!server) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of sockets) socket.destroy();
    await closed;
  };

  let server: net.Server | null = createServer();
  let dark: SilentHost | null = null;
  await listen(server, 0);
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    async cut() {
      await shut(server);
      server = null;
    },
    async goDark() {
      await shut(server);
      server = null;
      dark ??= await startSilentHost(port);
    },
    async restore() {
      await dark?.close();
      dark = null;
      if (server) return;
      server = createServer();
      await listen(server, port);
    },
    async close() {
      await dark?.close();
      dark = null;
      await shut(server);
      server = null;
    },
  };
}
