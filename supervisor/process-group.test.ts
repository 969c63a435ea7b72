import { spawn } from 'node:child_process';
import { createProcessTable } from './process-group';

describe('the process table walk', () => {
  it("finds every live process under its group, this process's own included", async () => {
    const table = createProcessTable();
    // A child in a group of its own (detached: setsid), as a trainer is started.
    const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { detached: true, stdio: 'ignore' });
    try {
      await new Promise((resolve) => child.once('spawn', resolve));
      const before = Date.now();
      const { groups, startedAtMs } = await table.scanGroups();
      expect(startedAtMs).toBeGreaterThanOrEqual(before);
      expect(groups.get(child.pid!)).toEqual([child.pid]);
      expect([...groups.values()].flat()).toContain(process.pid);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('shares one walk among callers at once, and a recent walk within maxScanAgeMs', async () => {
    const fresh = createProcessTable();
    const [a, b] = await Promise.all([fresh.scanGroups(), fresh.scanGroups()]);
    expect(a).toBe(b);
    expect(await fresh.scanGroups()).not.toBe(a); // maxScanAgeMs 0: a later call walks again

    const shared = createProcessTable({ maxScanAgeMs: 60_000 });
    const first = await shared.scanGroups();
    expect(await shared.scanGroups()).toBe(first);
  });
});
