import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { ConfigError } from '../schemas/env';
import type { SupervisorConfig } from '../schemas/supervisor';

/** A host user a trainer runs as. */
export interface RunAsUser {
  name: string;
  uid: number;
  gid: number;
  home: string;
}

/** The `passwd` line of `name` (`name:x:uid:gid:gecos:home:shell`, passwd(5)) among `lines`, or null. */
export function parsePasswd(lines: string, name: string): RunAsUser | null {
  for (const line of lines.split('\n')) {
    const cols = line.split(':');
    if (cols.length < 7 || cols[0] !== name || !/^\d+$/.test(cols[2]!) || !/^\d+$/.test(cols[3]!)) continue;
    return { name, uid: Number(cols[2]), gid: Number(cols[3]), home: cols[5]! };
  }
  return null;
}

/** Looks `name` up through NSS (`getent passwd`, so LDAP/SSSD users count), else in /etc/passwd. */
export function lookUpUser(name: string): RunAsUser | null {
  try {
    return parsePasswd(execFileSync('getent', ['passwd', name], { encoding: 'utf8' }), name);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') return null; // getent ran: exit 2 is "no such user"
  }
  try {
    return parsePasswd(readFileSync('/etc/passwd', 'utf8'), name);
  } catch {
    return null;
  }
}

/**
 * The users of the slots with `runAs`, by GPU. Refuses (ConfigError naming each field) a user the host does
 * not have, a switch the supervisor cannot make (not root), and a host without `setpriv` (util-linux), which
 * switches the user with its supplementary groups (the `video`/`render` groups GPU devices often need).
 */
export function resolveRunAs(
  config: SupervisorConfig,
  opts: { uid: number | null; lookUp?: (name: string) => RunAsUser | null; hasSetpriv?: () => boolean },
): Map<number, RunAsUser> {
  const lookUp = opts.lookUp ?? lookUpUser;
  const users = new Map<number, RunAsUser>();
  const problems: string[] = [];
  config.training.forEach((slot, i) => {
    if (!slot.runAs) return;
    const field = `training[${i}].runAs`;
    const user = lookUp(slot.runAs);
    if (!user) problems.push(`${field}: no user "${slot.runAs}" on this host`);
    else if (opts.uid !== 0 && opts.uid !== user.uid) {
      problems.push(`${field}: running trainers as ${slot.runAs} needs a supervisor running as root`);
    } else users.set(slot.gpuIndex, user);
  });
  if (users.size && !problems.length && !(opts.hasSetpriv ?? hasSetpriv)()) {
    problems.push('training[].runAs needs setpriv (util-linux) on PATH');
  }
  if (problems.length) throw new ConfigError(`invalid supervisor config:\n  ${problems.join('\n  ')}`);
  return users;
}

function hasSetpriv(): boolean {
  try {
    execFileSync('setpriv', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** `command` run as `user`: setpriv switches uid, gid and supplementary groups, then execs it (same pid). */
export function runAsCommand(user: RunAsUser, command: readonly string[]): string[] {
  return ['setpriv', `--reuid=${user.uid}`, `--regid=${user.gid}`, '--init-groups', '--', ...command];
}
