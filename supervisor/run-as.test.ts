import { ConfigError } from '../schemas/env';
import type { SupervisorConfig } from '../schemas/supervisor';
import { parsePasswd, resolveRunAs, runAsCommand } from './run-as';

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
      'invalid supervisor config:\n  training[0].runAs: no user "ghost" on this host\n  training[1].runAs: running trainers as trainer needs a supervisor running as root',
    );
  });

  it('refuses a host without setpriv', () => {
    expect(() => resolveRunAs(config('trainer'), { uid: 0, lookUp, hasSetpriv: () => false })).toThrow(
      /training\[\]\.runAs needs setpriv \(util-linux\) on PATH/,
    );
  });

  it('switches uid, gid and supplementary groups with setpriv, which execs the command in place', () => {
    expect(runAsCommand(TRAINER, ['python3', 'train.py'])).toEqual([
      'setpriv',
      '--reuid=1001',
      '--regid=1001',
      '--init-groups',
      '--',
      'python3',
      'train.py',
    ]);
  });
});
