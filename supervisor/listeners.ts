import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** Which processes serve a TCP port: what tells a vLLM's own GPU memory apart from anyone else's. */
export interface ListenerTable {
  /**
   * The process listening on `port` and every descendant of it (vLLM's engine core and tensor-parallel
   * workers hold the GPU memory, not the API server that owns the socket). Empty when none is found.
   */
  servingPids(port: number): number[];
  /** False where processes cannot be seen (not Linux): an empty `servingPids` then proves nothing. */
  readonly canSeeProcesses: boolean;
  /** Those of `pids` stopped by a signal (state T or t in /proc/<pid>/stat: SIGSTOP, a debugger). */
  stoppedOf(pids: readonly number[]): number[];
}

/** Socket inodes in LISTEN state (`st` 0A) by local port, from /proc/net/tcp and tcp6. */
function listeningInodes(): Map<number, Set<string>> {
  const byPort = new Map<number, Set<string>>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      // sl local_address rem_address st tx:rx tr:tm retrnsmt uid timeout inode
      if (cols.length < 10 || cols[3] !== '0A') continue;
      const port = parseInt(cols[1]!.split(':')[1] ?? '', 16);
      if (!byPort.has(port)) byPort.set(port, new Set());
      byPort.get(port)!.add(cols[9]!);
    }
  }
  return byPort;
}

const numericDirs = () => readdirSync('/proc').filter((name) => /^\d+$/.test(name));

function ownerOf(inodes: Set<string>): number | null {
  for (const pid of numericDirs()) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue; // gone, or another user's process
    }
    for (const fd of fds) {
      try {
        const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
        if (target.startsWith('socket:[') && inodes.has(target.slice(8, -1))) return Number(pid);
      } catch {
        // closed meanwhile
      }
    }
  }
  return null;
}

function childrenByParent(): Map<number, number[]> {
  const children = new Map<number, number[]>();
  for (const pid of numericDirs()) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue;
    }
    const ppid = Number(text.slice(text.lastIndexOf(')') + 2).split(' ')[1]);
    if (!children.has(ppid)) children.set(ppid, []);
    children.get(ppid)!.push(Number(pid));
  }
  return children;
}

/** The host's listeners from /proc (Linux); elsewhere every lookup is empty. */
export function createListenerTable(): ListenerTable {
  return {
    canSeeProcesses: existsSync('/proc/net/tcp'),
    stoppedOf(pids) {
      return pids.filter((pid) => {
        try {
          const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
          const state = text.slice(text.lastIndexOf(')') + 2, text.lastIndexOf(')') + 3);
          return state === 'T' || state === 't';
        } catch {
          return false; // gone: not stopped
        }
      });
    },
    servingPids(port) {
      const inodes = listeningInodes().get(port);
      const owner = inodes ? ownerOf(inodes) : null;
      if (owner === null) return [];
      const children = childrenByParent();
      const tree = [owner];
      for (let i = 0; i < tree.length; i += 1) tree.push(...(children.get(tree[i]!) ?? []));
      return tree;
    },
  };
}
