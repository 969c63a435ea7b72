/**
 * `haru dev` with a port already taken: a clear message naming each busy port and the variable that
 * moves it, exit status 1, and nothing started (no Temporal server, no database, no domain).
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { devEnv, processesMentioning, spawnDev } from './support';

jest.setTimeout(120_000);

function occupy(port: number): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

describe('haru dev with a busy port', () => {
  let stateDir: string;
  const servers: net.Server[] = [];

  beforeEach(() => {
    stateDir = mkdtempSync(path.join(os.tmpdir(), 'haru-dev-ports-'));
  });
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('names each busy port and its variable, and starts nothing', async () => {
    const env = await devEnv(stateDir);
    const simSupervisorPort = 8721 + Number(env.HARU_SIM_PORT_OFFSET); // west's supervisor in the dev layout
    servers.push(await occupy(Number(env.PORT)), await occupy(simSupervisorPort));

    const dev = spawnDev(env);
    const exit = await dev.exited;

    expect(exit.code).toBe(1);
    const lines = dev.stderr().trim().split('\n');
    expect(lines).toEqual([
      `haru: port ${env.PORT} is already in use (wanted for the Haru API): stop what is using it, or set PORT to choose another`,
      `haru: port ${simSupervisorPort} is already in use (wanted for the supervisor of simulated domain west): stop what is using it, or set HARU_SIM_PORT_OFFSET to choose another`,
    ]);
    // Nothing started: no Temporal database, no embedded Postgres, no simulated host state, no process.
    expect(existsSync(path.join(stateDir, 'temporal.db'))).toBe(false);
    expect(existsSync(path.join(stateDir, 'pgdata'))).toBe(false);
    expect(existsSync(path.join(stateDir, 'sim'))).toBe(false);
    expect(readdirSync(stateDir).filter((f) => f !== 'dev')).toEqual([]);
    expect(processesMentioning(stateDir)).toEqual([]);
  });

  it('names the Temporal ports with their variables', async () => {
    const env = await devEnv(stateDir);
    servers.push(await occupy(Number(env.HARU_TEMPORAL_UI_PORT)));
    const dev = spawnDev(env);
    expect((await dev.exited).code).toBe(1);
    expect(dev.stderr()).toContain(
      `port ${env.HARU_TEMPORAL_UI_PORT} is already in use (wanted for the Temporal Web UI): stop what is using it, or set HARU_TEMPORAL_UI_PORT to choose another`,
    );
    expect(existsSync(path.join(stateDir, 'temporal.db'))).toBe(false);
  });
});
