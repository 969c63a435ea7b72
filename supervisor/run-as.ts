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
 * What running trainers as another user takes without root (capabilities(7) bit numbers): switching uid and gid
 * (`setpriv`), handing the checkpoint directory over (`chown`), and signalling the trainer's processes, which
 * are no longer the supervisor's uid. The host kit's unit grants exactly these (deploy/systemd/).
 */
export const RUN_AS_CAPABILITIES = { CAP_CHOWN: 0, CAP_KILL: 5, CAP_SETGID: 6, CAP_SETUID: 7 } as const;

/** The capabilities in a `/proc/<pid>/status` text's effective set (`CapEff`, hex); empty when unreadable. */
export function effectiveCapabilities(statusText: string): Set<string> {
  const hex = /^CapEff:\s*([0-9a-f]+)$/im.exec(statusText)?.[1];
  const mask = hex ? BigInt(`0x${hex}`) : 0n;
  return new Set(
    Object.entries(RUN_AS_CAPABILITIES)
      .filter(([, bit]) => (mask >> BigInt(bit)) & 1n)
      .map(([name]) => name),
  );
}

/** This process's effective capabilities among RUN_AS_CAPABILITIES (none where /proc is not Linux's). */
export function ownCapabilities(): Set<string> {
  try {
    return effectiveCapabilities(readFileSync('/proc/self/status', 'utf8'));
  } catch {
    return new Set();
  }
}

/**
 * The users of the slots with `runAs`, by GPU. Refuses (ConfigError naming each field) a user the host does
 * not have, root, the supervisor's own user, a switch the supervisor cannot make (neither root nor holding
 * RUN_AS_CAPABILITIES), and a host without `setpriv` (util-linux), which switches the user with its
 * supplementary groups (the `video`/`render` groups GPU devices often need) and drops capabilities.
 */
export function resolveRunAs(
  config: SupervisorConfig,
  opts: {
    uid: number | null;
    capabilities?: ReadonlySet<string>;
    lookUp?: (name: string) => RunAsUser | null;
    hasSetpriv?: () => boolean;
  },
): Map<number, RunAsUser> {
  const lookUp = opts.lookUp ?? lookUpUser;
  const users = new Map<number, RunAsUser>();
  const problems: string[] = [];
  const held = opts.capabilities ?? new Set<string>();
  const missing = Object.keys(RUN_AS_CAPABILITIES).filter((name) => !held.has(name));
  config.training.forEach((slot, i) => {
    if (!slot.runAs) return;
    const field = `training[${i}].runAs`;
    const user = lookUp(slot.runAs);
    if (!user) problems.push(`${field}: no user "${slot.runAs}" on this host`);
    else if (user.uid === 0) problems.push(`${field}: ${slot.runAs} is root, which a trainer must never be`);
    else if (user.uid === opts.uid) {
      // It would separate nothing, and the trainer firewall, keyed on the trainers' uids, would cut the
      // supervisor off its own engines.
      problems.push(`${field}: ${slot.runAs} is the supervisor's own user; name another one, or none`);
    } else if (opts.uid !== 0 && missing.length > 0) {
      problems.push(
        `${field}: running trainers as ${slot.runAs} needs a supervisor running as root or holding ` +
          `${Object.keys(RUN_AS_CAPABILITIES).join(', ')} (missing ${missing.join(', ')}; ` +
          'the host kit grants them with AmbientCapabilities=)',
      );
    } else users.set(slot.gpuIndex, user);
  });
  const dropsCapabilities = opts.uid !== 0 && held.size > 0 && config.training.length > 0;
  if ((users.size || dropsCapabilities) && !problems.length && !(opts.hasSetpriv ?? hasSetpriv)()) {
    problems.push(
      users.size
        ? 'training[].runAs needs setpriv (util-linux) on PATH'
        : `a supervisor holding ${[...held].join(', ')} starts its trainers through setpriv (util-linux), which is not on PATH`,
    );
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

/**
 * The command a trainer is started with: as its `user` (runAsCommand); without one, from a supervisor holding
 * capabilities without root, through setpriv dropping them (ambient capabilities survive exec, and CAP_SETUID
 * alone would let the trainer become root); else `command` itself (a root supervisor's trainer without `runAs`
 * is root: the operator's choice).
 */
export function trainerCommand(
  user: RunAsUser | undefined,
  command: readonly string[],
  dropCapabilities: boolean,
): string[] {
  if (user) return runAsCommand(user, command);
  if (dropCapabilities) return ['setpriv', ...DROP_CAPABILITIES, '--', ...command];
  return [...command];
}

/** setpriv's options that hand no capability on and keep a setuid program from giving any back. */
const DROP_CAPABILITIES = ['--inh-caps=-all', '--ambient-caps=-all', '--no-new-privs'] as const;

/**
 * `command` run as `user`: setpriv switches uid, gid and supplementary groups, then execs it (same pid). It
 * clears the inheritable and ambient capabilities first, so a supervisor holding capabilities instead of root
 * hands none on (a uid switch between two non-root users keeps them otherwise, and CAP_SETUID would let the
 * trainer become anyone), and sets no_new_privs, so no setuid program gives the trainer privileges back.
 */
export function runAsCommand(user: RunAsUser, command: readonly string[]): string[] {
  return [
    'setpriv',
    `--reuid=${user.uid}`,
    `--regid=${user.gid}`,
    '--init-groups',
    ...DROP_CAPABILITIES,
    '--',
    ...command,
  ];
}
