import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { killSimDomain, SIM_STATE_FILE, simDomainMarker } from './domain-kill';
import { isAlive } from './gpu-state';
import { SIM_MARKER_ENV } from './processes';

let dir: string;
let host: ChildProcess;
let exited: Promise<void>;
const marker = randomUUID();

beforeAll(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'haru-sim-kill-'));
  // A process of the domain now recorded in `dir`, as `haru sim domain` run by hand from that directory starts it.
  host = spawn('sleep', ['60'], { env: { ...process.env, [SIM_MARKER_ENV]: marker }, stdio: 'ignore' });
  exited = new Promise((resolve) => host.once('exit', () => resolve()));
  writeFileSync(
    path.join(dir, SIM_STATE_FILE),
    JSON.stringify({ marker, pids: [host.pid], checkpointDirs: [], supervisorUrl: 'http://127.0.0.1:9' }),
  );
});
afterAll(async () => {
  if (host.exitCode === null && host.signalCode === null) host.kill('SIGKILL');
  await exited;
  rmSync(dir, { recursive: true, force: true });
});

it('leaves a domain started again from the same directory alone when asked to stop only an earlier run', async () => {
  expect(simDomainMarker(dir)).toBe(marker);
  expect(await killSimDomain(dir, { onlyMarker: randomUUID() })).toBe(0);
  expect(await killSimDomain(dir, { onlyMarker: null })).toBe(0);
  expect(isAlive(host.pid!)).toBe(true);
});

it('stops the run it was asked to stop', async () => {
  expect(await killSimDomain(dir, { onlyMarker: marker })).toBe(1);
  await exited;
  expect(host.signalCode).toBe('SIGKILL');
  expect(simDomainMarker(dir)).toBeNull();
});
