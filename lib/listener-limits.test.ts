import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { listenerLimits } from './listener-limits';

describe('listenerLimits', () => {
  let server: http.Server;
  let port: number;
  beforeAll(async () => {
    server = http.createServer(listenerLimits(300), (_req, res) => res.end('ok'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));

  it('answers 408 and closes a connection that trickles its head past the timeout', async () => {
    const socket = net.connect(port, '127.0.0.1');
    let answer = '';
    socket.on('data', (chunk) => (answer += chunk.toString()));
    socket.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n'); // the head never ends
    // Node's own default would hold it 60 s or more: give up on it long before that.
    const closedAfterMs = await new Promise<number>((resolve, reject) => {
      const started = Date.now();
      const giveUp = setTimeout(() => {
        socket.destroy();
        reject(new Error('the trickled head was still held after 5 s'));
      }, 5_000);
      socket.on('close', () => {
        clearTimeout(giveUp);
        resolve(Date.now() - started);
      });
    });
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
    console.log(`a trickled head was cut after ${closedAfterMs} ms (timeout 300 ms)`);
  });

  it('serves a request whose head comes whole', async () => {
    const res = await fetch(`http://127.0.0.1:${port}/`);
    expect(await res.text()).toBe('ok');
  });
});
