/**
 * Summarises a V8 CPU profile written by `npm run bench:proxy -- --profile-dir DIR`: over the last
 * `--window` seconds before the process stopped (the load; start-up and shutdown left out), the self time by
 * file and by function, and for each `--match` pattern the share of busy (non-idle) time whose stack has a
 * frame matching it (a function's inclusive share, async hops not followed).
 *
 *   npm run bench:proxy-profile -- DIR/CPU.*.cpuprofile [--window 7] [--top 20] [--match lib/logger.ts --match writev]
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    window: { type: 'string', default: '7' },
    top: { type: 'string', default: '20' },
    match: { type: 'string', multiple: true, default: [] },
  },
});
if (positionals.length !== 1) throw new Error('usage: proxy-profile.ts FILE.cpuprofile [--window S] [--match RE]…');
const profile = JSON.parse(readFileSync(positionals[0]!, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const file = (n: ProfileNode) =>
  (n.callFrame.url || '(native)')
    .replace(/^.*?\/(node_modules\/)/, '$1')
    .replace(/^file:\/\/.*?\/(api|lib|core|schemas)\//, '$1/');
const fn = (n: ProfileNode) => `${n.callFrame.functionName || '(anonymous)'} ${file(n)}`;

const TAIL_US = 300_000; // the stop itself
const from = profile.endTime - TAIL_US - Number(args.window) * 1e6;
const patterns = args.match.map((m) => new RegExp(m));
const selfByFile = new Map<string, number>();
const selfByFn = new Map<string, number>();
const matched = patterns.map(() => 0);
let total = 0;
let busy = 0;
let at = profile.startTime;
profile.samples.forEach((id, i) => {
  const dt = profile.timeDeltas[i] ?? 0;
  at += dt;
  if (at < from || at > profile.endTime - TAIL_US) return;
  const node = byId.get(id)!;
  total += dt;
  selfByFile.set(file(node), (selfByFile.get(file(node)) ?? 0) + dt);
  selfByFn.set(fn(node), (selfByFn.get(fn(node)) ?? 0) + dt);
  if (node.callFrame.functionName === '(idle)') return;
  busy += dt;
  const stack: string[] = [];
  for (let n: number | undefined = id; n !== undefined; n = parent.get(n)) stack.push(fn(byId.get(n)!));
  patterns.forEach((re, j) => {
    if (stack.some((frame) => re.test(frame))) matched[j]! += dt;
  });
});

const pct = (t: number, of: number) => `${((100 * t) / of).toFixed(1).padStart(5)}%`;
const show = (title: string, m: Map<string, number>) => {
  process.stdout.write(`\n${title} (window ${(total / 1000).toFixed(0)} ms, busy ${(busy / 1000).toFixed(0)} ms)\n`);
  for (const [k, t] of [...m].sort((a, b) => b[1] - a[1]).slice(0, Number(args.top)))
    process.stdout.write(`${pct(t, total)} ${(t / 1000).toFixed(0).padStart(6)} ms  ${k}\n`);
};
show('self time by file', selfByFile);
show('self time by function', selfByFn);
if (patterns.length) process.stdout.write('\nshare of busy time with a matching frame on the stack\n');
patterns.forEach((re, j) => process.stdout.write(`${pct(matched[j]!, busy)}  ${re.source}\n`));
