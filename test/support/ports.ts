import net from 'node:net';
import { readFileSync } from 'node:fs';

/**
 * The range ports are handed out from: below the kernel's ephemeral range, which every outgoing
 * connection (Postgres, HTTP clients, Temporal) draws its local port from. A port the OS picked with
 * `listen(0)` comes from that range, so between closing it and a child process binding it an outgoing
 * connection can take it (seen as EADDRINUSE on a busy machine); ports below the range only collide
 * with other listeners.
 */
function handOutRange(): { low: number; high: number } {
  try {
    const [ephemeralLow] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/);
    const high = Number(ephemeralLow) - 1;
    if (Number.isInteger(high) && high > 12_000) return { low: 10_000, high };
  } catch {
    // not Linux: fall through
  }
  return { low: 20_000, high: 32_767 };
}

const RANGE = handOutRange();
/** Ports this process has handed out: never twice (a child may not have bound the first one yet). */
const handedOut = new Set<number>();

const canListen = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });

/** A TCP port on 127.0.0.1 that was free a moment ago, for a server another process will start. */
export async function freePort(): Promise<number> {
  for (let tries = 0; tries < 200; tries++) {
    const port = RANGE.low + Math.floor(Math.random() * (RANGE.high - RANGE.low + 1));
    if (handedOut.has(port)) continue;
    handedOut.add(port);
    if (await canListen(port)) return port;
  }
  throw new Error(`no free port found in ${RANGE.low}-${RANGE.high} after 200 tries`);
}
