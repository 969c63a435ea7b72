import { readFileSync } from 'node:fs';
import net from 'node:net';
import { freePort } from './ports';

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
