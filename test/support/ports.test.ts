import { readFileSync } from 'node:fs';
import net from 'node:net';
import { freePort } from './ports';
import type * as PortsModule from './ports';

const listenOn = (port: number) =>
  new Promise<net.Server>((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });

it('hands out distinct bindable ports below the ephemeral range that outgoing connections use', async () => {
  const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()));
  expect(new Set(ports).size).toBe(ports.length);
  const [ephemeralLow] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/);
  for (const port of ports) expect(port).toBeLessThan(Number(ephemeralLow));
  const servers = await Promise.all(ports.map(listenOn));
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
});

it('never hands out a port fetch refuses to connect to (a simulator there would never look ready)', async () => {
  const refused = await fetch('http://127.0.0.1:10080/').then(
    () => null,
    (err: Error) => err,
  );
  expect((refused?.cause as Error | undefined)?.message).toBe('bad port');

  const previousWorker = process.env.JEST_WORKER_ID;
  process.env.JEST_WORKER_ID = '1'; // the slice 10080 falls in
  let ports!: typeof PortsModule;
  await jest.isolateModulesAsync(async () => {
    ports = await import('./ports');
  });
  process.env.JEST_WORKER_ID = previousWorker;
  const { low, high } = ports.RANGE;
  expect(low).toBeLessThanOrEqual(10_080);
  expect(high).toBeGreaterThanOrEqual(10_080);
  const drawing = (port: number) => (port - low + 0.5) / (high - low + 1);
  const random = jest.spyOn(Math, 'random').mockReturnValueOnce(drawing(10_080));
  try {
    const port = await ports.freePort();
    expect(port).not.toBe(10_080);
    expect(random.mock.calls.length).toBeGreaterThan(1);
  } finally {
    random.mockRestore();
  }
});
