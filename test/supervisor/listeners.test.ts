/** supervisor/listeners.ts against real sockets and processes of this host (Linux /proc). */
import { spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createListenerTable } from '../../supervisor/listeners';

const listen = (port = 0) =>
  new Promise<http.Server>((resolve) => {
    const server = http.createServer();
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
const close = (server: http.Server) => new Promise((resolve) => server.close(resolve));
const portOf = (server: http.Server) => (server.address() as AddressInfo).port;

describe('the listener table', () => {
  it('finds the process serving a port, and keeps finding it while its socket stays', async () => {
    const server = await listen();
    try {
      const table = createListenerTable();
      expect(table.servingPids(portOf(server))[0]).toBe(process.pid);
      expect(table.servingPids(portOf(server))[0]).toBe(process.pid);
    } finally {
      await close(server);
    }
  });

  it('forgets a closed listener, and finds a server that listens on the port again', async () => {
    const table = createListenerTable();
    const first = await listen();
    const port = portOf(first);
    expect(table.servingPids(port)[0]).toBe(process.pid);
    await close(first);
    expect(table.servingPids(port)).toEqual([]);
    // Another process takes the port: a restarted server is a new socket, looked up afresh.
    const child = spawn(
      process.execPath,
      ['-e', `require('http').createServer().listen(${port}, '127.0.0.1', () => console.log('up'))`],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    try {
      await new Promise((resolve) => child.stdout.once('data', resolve));
      expect(table.servingPids(port)).toEqual([child.pid]);
    } finally {
      child.kill('SIGKILL');
      await new Promise((resolve) => child.once('exit', resolve));
    }
    expect(table.servingPids(port)).toEqual([]);
  });

  it('sees a child started after the first lookup once its tree is looked up again', async () => {
    let nowMs = 0;
    const table = createListenerTable(() => nowMs);
    const server = await listen();
    const port = portOf(server);
    try {
      // This process and its descendants (a test runner has some of its own).
      const before = table.servingPids(port);
      expect(before[0]).toBe(process.pid);
      const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)'], { stdio: 'ignore' });
      try {
        expect(table.servingPids(port)).toEqual(before); // within the refresh: the tree as found
        nowMs += 5_000;
        expect(table.servingPids(port)).toEqual(expect.arrayContaining([process.pid, child.pid]));
      } finally {
        child.kill('SIGKILL');
        await new Promise((resolve) => child.once('exit', resolve));
      }
      expect(table.servingPids(port)).not.toContain(child.pid); // the dead dropped at every call
    } finally {
      await close(server);
    }
  });
});
