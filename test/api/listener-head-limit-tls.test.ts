/**
 * The head limit on a TLS listener, with a real certificate: a client that opens the connection and never
 * finishes its handshake is cut at the limit, not held for Node's 120 s.
 */
import https from 'node:https';
import net from 'node:net';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { createTestPki } from '../support/pki';
import { listenerLimits } from '../../lib/listener-limits';

it('closes a TLS connection whose handshake never comes within the limit', async () => {
  const pki = createTestPki();
  const server = https.createServer(
    { ...listenerLimits(300), cert: readFileSync(pki.server.cert), key: readFileSync(pki.server.key) },
    (_req, res) => res.end('ok'),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const socket = net.connect((server.address() as AddressInfo).port, '127.0.0.1'); // sends no ClientHello
    const closedAfterMs = await new Promise<number>((resolve, reject) => {
      const started = Date.now();
      const giveUp = setTimeout(() => {
        socket.destroy();
        reject(new Error('the silent TLS connection was still held after 5 s'));
      }, 5_000);
      socket.on('close', () => {
        clearTimeout(giveUp);
        resolve(Date.now() - started);
      });
    });
    console.log(`a silent TLS handshake was cut after ${closedAfterMs} ms (limit 300 ms)`);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
});
