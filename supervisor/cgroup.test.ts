import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { detectTracking, enterCgroupCommand, parseCgroup2Mount, parseOwnCgroup, trainingRefusal } from './cgroup';

// /proc/self/cgroup and /proc/self/mountinfo of a hybrid host (v1 controllers, cgroup2 at .../unified).
const HYBRID_CGROUP = `9:name=systemd:/
8:pids:/
4:memory:/process_api/f49e7df056693098feaed64b472f4a1b
1:cpu:/
0::/
`;
const HYBRID_MOUNTINFO = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`;
// A systemd service on a unified host (cgroups(7), proc(5) formats).
const UNIFIED_CGROUP = '0::/system.slice/haru-supervisor.service\n';
const UNIFIED_MOUNTINFO =
  '35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n';
// cgroup v1 only.
const V1_CGROUP = '12:pids:/user.slice\n1:name=systemd:/user.slice/session-1.scope\n';

describe('cgroup discovery', () => {
  it("reads the supervisor's cgroup v2 path and the cgroup2 mount", () => {
    expect(parseOwnCgroup(HYBRID_CGROUP)).toBe('/');
    expect(parseOwnCgroup(UNIFIED_CGROUP)).toBe('/system.slice/haru-supervisor.service');
    expect(parseOwnCgroup(V1_CGROUP)).toBeNull();
    expect(parseCgroup2Mount(HYBRID_MOUNTINFO)).toEqual({ root: '/', mountPoint: '/sys/fs/cgroup/unified' });
    expect(parseCgroup2Mount(UNIFIED_MOUNTINFO)).toEqual({ root: '/', mountPoint: '/sys/fs/cgroup' });
    expect(parseCgroup2Mount('35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n')).toBeNull();
  });

  describe('falls back to process groups, saying why', () => {
    const made: string[] = [];
    afterAll(() => made.forEach((d) => rmSync(d, { recursive: true, force: true })));
    /** A /proc whose self/cgroup and self/mountinfo are the given text. */
    const fakeProc = (cgroup: string, mountinfo: string) => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-cg-'));
      made.push(dir);
      mkdirSync(path.join(dir, 'self'));
      writeFileSync(path.join(dir, 'self', 'cgroup'), cgroup);
      writeFileSync(path.join(dir, 'self', 'mountinfo'), mountinfo);
      return dir;
    };

    it('on a host with cgroup v1 only', () => {
      expect(detectTracking({ proc: fakeProc(V1_CGROUP, HYBRID_MOUNTINFO) })).toEqual({
        kind: 'process-group',
        reason: 'cgroup v2 is not mounted on this host',
      });
    });

    it('where its own cgroup cannot take a child', () => {
      const proc = fakeProc('0::/nowhere/at/all\n', '41 31 0:38 / /nonexistent-cgroup2 rw - cgroup2 cgroup2 rw\n');
      expect(detectTracking({ proc })).toEqual({
        kind: 'process-group',
        reason: expect.stringMatching(
          /^cannot create a cgroup under its own \/nonexistent-cgroup2\/nowhere\/at\/all \(ENOENT.*\): run it as root or with a delegated cgroup \(systemd Delegate=yes\)$/,
        ),
      });
    });

    it('where the directory is not a cgroup v2 one', () => {
      const notCgroup = mkdtempSync(path.join(os.tmpdir(), 'haru-notcg-'));
      made.push(notCgroup);
      const proc = fakeProc('0::/\n', `41 31 0:38 / ${notCgroup} rw - cgroup2 cgroup2 rw\n`);
      expect(detectTracking({ proc })).toEqual({
        kind: 'process-group',
        reason: `${notCgroup} is not a cgroup v2 directory`,
      });
    });
  });

  it('enters the cgroup before exec, so the leader keeps its pid', () => {
    expect(enterCgroupCommand('/sys/fs/cgroup/x', ['python3', 'train.py'])).toEqual([
      '/bin/sh',
      '-c',
      'echo $$ > "$0" && exec "$@"',
      '/sys/fs/cgroup/x/cgroup.procs',
      'python3',
      'train.py',
    ]);
  });
});

describe('training without cgroup tracking', () => {
  const pgroup = { kind: 'process-group' as const, reason: 'cgroup v2 is not mounted on this host' };

  it('is refused, naming the reason and the override', () => {
    const refusal = trainingRefusal(pgroup, false);
    expect(refusal).toContain('training refused: no cgroup to track its processes in (cgroup v2 is not mounted');
    expect(refusal).toContain('Delegate=yes');
    expect(refusal).toContain('HARU_TRAINING_ALLOW_PGROUP=1');
  });

  it('is allowed when the operator says so, and a cgroup needs no override', () => {
    expect(trainingRefusal(pgroup, true)).toBeNull();
    expect(trainingRefusal({ kind: 'cgroup', parent: '/sys/fs/cgroup/system.slice/x.service' }, false)).toBeNull();
  });
});
