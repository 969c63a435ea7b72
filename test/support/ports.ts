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

/**
 * Jest runs test files in several worker processes, each with its own `handedOut`: each worker draws from its
 * own slice of the range, so two workers never hand out the same port before either child has bound it.
 */
const WORKER_SLICES = 16;

function workerSlice(range: { low: number; high: number }): { low: number; high: number } {
  const worker = Number(process.env.JEST_WORKER_ID);
  if (!Number.isInteger(worker) || worker < 1) return range;
  const width = Math.floor((range.high - range.low + 1) / WORKER_SLICES);
  const low = range.low + ((worker - 1) % WORKER_SLICES) * width;
  return { low, high: low + width - 1 };
}

/** This process's slice of the range ports are handed out from. */
export const RANGE = workerSlice(handOutRange());

/**
 * Ports the Fetch standard's "bad port" list blocks (https://fetch.spec.whatwg.org/#port-blocking; undici's
 * `lib/web/fetch/constants.js` `badPorts`): `fetch` to one fails without a packet, so a simulator given one never
 * answers a readiness check. 10080 is the only one at or above 10,000, the lowest port handed out.
 */
const FETCH_BLOCKED = new Set([10_080]);
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
    if (handedOut.has(port) || FETCH_BLOCKED.has(port)) continue;
    handedOut.add(port);
    if (await canListen(port)) return port;
  }
  throw new Error(`no free port found in ${RANGE.low}-${RANGE.high} after 200 tries`);
}

/**
 * An offset under which every one of `ports` (+ offset) is free now and none was handed out by this process,
 * kept below the ephemeral range like `freePort`; the ports are then counted as handed out, so a later
 * `freePort` never returns one of them (a dev stack's simulators bind them only after it starts).
 */
export async function freeOffset(ports: number[]): Promise<number> {
  const highest = Math.max(...ports);
  const lowest = Math.min(...ports);
  if (highest - lowest > RANGE.high - RANGE.low)
    throw new Error(`ports spanning ${highest - lowest} do not fit ${RANGE.low}-${RANGE.high}`);
  for (let tries = 0; tries < 200; tries++) {
    const offset = RANGE.low - lowest + Math.floor(Math.random() * (RANGE.high - highest - (RANGE.low - lowest) + 1));
    const shifted = ports.map((p) => p + offset);
    if (shifted.some((p) => handedOut.has(p) || FETCH_BLOCKED.has(p))) continue;
    const free = await Promise.all(shifted.map(canListen));
    if (!free.every(Boolean)) continue;
    for (const p of shifted) handedOut.add(p);
    return offset;
  }
  throw new Error(`no offset with ${ports.length} free ports found after 200 tries`);
}
