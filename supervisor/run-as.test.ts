import { ConfigError } from '../schemas/env';
import type { SupervisorConfig } from '../schemas/supervisor';
import { effectiveCapabilities, parsePasswd, resolveRunAs, runAsCommand, trainerCommand } from './run-as';

// /etc/passwd lines of a Debian host (passwd(5)).
const PASSWD = `root:x:0:0:root:/root:/bin/bash
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
trainer:x:1001:1001:LoRA trainer,,,:/home/trainer:/bin/bash
`;
const TRAINER = { name: 'trainer', uid: 1001, gid: 1001, home: '/home/trainer' };

const config = (...runAs: (string | undefined)[]): SupervisorConfig => ({
  inference: [],
  training: runAs.map((user, i) => ({ gpuIndex: i, command: ['python3'], checkpointDir: `/c${i}`, runAs: user })),
});
const lookUp = (name: string) => parsePasswd(PASSWD, name);

describe('runAs', () => {
  it('reads a user from passwd lines', () => {
    expect(parsePasswd(PASSWD, 'trainer')).toEqual(TRAINER);
    expect(parsePasswd(PASSWD, 'train')).toBeNull();
  });

  it('resolves each slot’s user when the supervisor is root', () => {
    const users = resolveRunAs(config(undefined, 'trainer'), { uid: 0, lookUp, hasSetpriv: () => true });
    expect([...users]).toEqual([[1, TRAINER]]);
  });

  it('refuses at start a user the host lacks and a switch a non-root supervisor cannot make, naming the field', () => {
    const run = () => resolveRunAs(config('ghost', 'trainer'), { uid: 1000, lookUp, hasSetpriv: () => true });
    expect(run).toThrow(ConfigError);
    expect(run).toThrow(
      'invalid supervisor config:\n  training[0].runAs: no user "ghost" on this host\n  training[1].runAs: running trainers as trainer needs a supervisor running as root or holding CAP_CHOWN, CAP_KILL, CAP_SETGID, CAP_SETUID (missing CAP_CHOWN, CAP_KILL, CAP_SETGID, CAP_SETUID; the host kit grants them with AmbientCapabilities=)',
    );
  });

  it('lets a non-root supervisor holding the four capabilities switch, and names what one lacks', () => {
    const all = new Set(['CAP_CHOWN', 'CAP_KILL', 'CAP_SETGID', 'CAP_SETUID']);
    const users = resolveRunAs(config('trainer'), { uid: 998, capabilities: all, lookUp, hasSetpriv: () => true });
    expect([...users]).toEqual([[0, TRAINER]]);
    const noKill = new Set([...all].filter((c) => c !== 'CAP_KILL'));
    expect(() =>
      resolveRunAs(config('trainer'), { uid: 998, capabilities: noKill, lookUp, hasSetpriv: () => true }),
    ).toThrow(/\(missing CAP_KILL;/);
  });

  it('refuses root and the supervisor’s own user as a trainer’s', () => {
    const all = new Set(['CAP_CHOWN', 'CAP_KILL', 'CAP_SETGID', 'CAP_SETUID']);
    expect(() => resolveRunAs(config('root'), { uid: 0, lookUp, hasSetpriv: () => true })).toThrow(
      /training\[0\]\.runAs: root is root, which a trainer must never be/,
    );
    expect(() =>
      resolveRunAs(config('trainer'), { uid: 1001, capabilities: all, lookUp, hasSetpriv: () => true }),
    ).toThrow(/training\[0\]\.runAs: trainer is the supervisor's own user/);
  });

  it('needs setpriv to start any trainer from a supervisor holding capabilities, runAs or not', () => {
    const run = (capabilities: Set<string>) =>
      resolveRunAs(config(undefined), { uid: 998, capabilities, lookUp, hasSetpriv: () => false });
    expect(() => run(new Set(['CAP_KILL']))).toThrow(
      /a supervisor holding CAP_KILL starts its trainers through setpriv/,
    );
    expect(run(new Set()).size).toBe(0);
  });

  it('starts a trainer without runAs through setpriv dropping the supervisor’s capabilities, and only then', () => {
    expect(trainerCommand(undefined, ['python3', 'train.py'], true)).toEqual([
      'setpriv',
      '--inh-caps=-all',
      '--ambient-caps=-all',
      '--no-new-privs',
      '--',
      'python3',
      'train.py',
    ]);
    expect(trainerCommand(undefined, ['python3', 'train.py'], false)).toEqual(['python3', 'train.py']);
    expect(trainerCommand(TRAINER, ['python3'], false)).toEqual(runAsCommand(TRAINER, ['python3']));
  });

  it('reads the effective set of a /proc status, bit by bit', () => {
    // CapEff of a process granted CAP_CHOWN, CAP_KILL, CAP_SETGID and CAP_SETUID (bits 0, 5, 6, 7): 0xe1.
    expect(
      [...effectiveCapabilities('Name:\tnode\nCapPrm:\t00000000000000e1\nCapEff:\t00000000000000e1\n')].sort(),
    ).toEqual(['CAP_CHOWN', 'CAP_KILL', 'CAP_SETGID', 'CAP_SETUID']);
    // Root's full set holds them all; a plain user's none; CAP_SETUID alone (0x80) is one.
    expect(effectiveCapabilities('CapEff:\t000001ffffffffff\n').size).toBe(4);
    expect(effectiveCapabilities('CapEff:\t0000000000000000\n').size).toBe(0);
    expect([...effectiveCapabilities('CapEff:\t0000000000000080\n')]).toEqual(['CAP_SETUID']);
    expect(effectiveCapabilities('no such line').size).toBe(0);
  });

  it('refuses a host without setpriv', () => {
    expect(() => resolveRunAs(config('trainer'), { uid: 0, lookUp, hasSetpriv: () => false })).toThrow(
      /training\[\]\.runAs needs setpriv \(util-linux\) on PATH/,
    );
  });

  it('switches uid, gid and supplementary groups with setpriv, hands on no capability, and execs the command in place', () => {
    expect(runAsCommand(TRAINER, ['python3', 'train.py'])).toEqual([
      'setpriv',
      '--reuid=1001',
      '--regid=1001',
      '--init-groups',
      '--inh-caps=-all',
      '--ambient-caps=-all',
      '--no-new-privs',
      '--',
      'python3',
      'train.py',
    ]);
  });
});
