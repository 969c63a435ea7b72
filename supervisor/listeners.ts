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

/** The process holding one of `inodes` (a listening socket), with the fd it holds it on and the fd's link. */
function ownerOf(inodes: Set<string>): { pid: number; fd: string; link: string } | null {
  for (const pid of numericDirs()) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue; // gone, or another user's process
    }
    for (const fd of fds) {
      try {
        const link = readlinkSync(`/proc/${pid}/fd/${fd}`);
        if (link.startsWith('socket:[') && inodes.has(link.slice(8, -1))) return { pid: Number(pid), fd, link };
      } catch {
        // closed meanwhile
      }
    }
  }
  return null;
}

/** Whether `pid` still holds the socket `link` on `fd`: one readlink, where finding it again reads every fd. */
function stillHolds(pid: number, fd: string, link: string): boolean {
  try {
    return readlinkSync(`/proc/${pid}/fd/${fd}`) === link;
  } catch {
    return false;
  }
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

/** How long a port's process tree is reused before its descendants are looked up again. */
const TREE_REFRESH_MS = 5_000;

const isAlive = (pid: number): boolean => existsSync(`/proc/${pid}`);

/**
 * The host's listeners from /proc (Linux); elsewhere every lookup is empty. Finding a socket's owner reads
 * /proc/net/tcp (the kernel walks every socket for it) and every fd of every process, and a process tree every
 * process's stat: tens of ms on a host of a hundred processes, far more in a container of thousands, and
 * synchronous on the supervisor's event loop. So each port keeps the process and fd found holding its listening
 * socket, and checks with one readlink that it still does (a listening socket never changes its port; a
 * restarted server has a new socket and is looked up afresh). The tree's descendants are looked up again every
 * TREE_REFRESH_MS (vLLM starts its engine and workers once, at launch), and the dead are dropped at every call.
 */
export function createListenerTable(now: () => number = Date.now): ListenerTable {
  const ports = new Map<number, { fd: string; link: string; tree: number[]; treeAtMs: number }>();
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
      const atMs = now();
      const known = ports.get(port);
      if (known && stillHolds(known.tree[0]!, known.fd, known.link)) {
        if (atMs - known.treeAtMs >= TREE_REFRESH_MS) {
          known.tree = treeOf(known.tree[0]!);
          known.treeAtMs = atMs;
        } else {
          known.tree = known.tree.filter((pid, i) => i === 0 || isAlive(pid));
        }
        return [...known.tree];
      }
      ports.delete(port);
      const inodes = listeningInodes().get(port);
      const owner = inodes ? ownerOf(inodes) : null;
      if (owner === null) return [];
      const tree = treeOf(owner.pid);
      ports.set(port, { fd: owner.fd, link: owner.link, tree, treeAtMs: atMs });
      return [...tree];
    },
  };
}

/** `owner` and every descendant of it. */
function treeOf(owner: number): number[] {
  const children = childrenByParent();
  const tree = [owner];
  for (let i = 0; i < tree.length; i += 1) tree.push(...(children.get(tree[i]!) ?? []));
  return tree;
}
