import { execFileSync } from 'node:child_process';
import type { Command } from 'commander';
import { followRouteIntent } from '../../deploy/route-intent/nginx';
import { routeIntentSchema } from '../../schemas/route-intent';
import type { ApiClient } from '../api-client';
import { integerArg } from '../arguments';
import { apiClientFor } from '../connection';
import { BadInputError } from '../exit-codes';

interface NginxOptions {
  fleet: string;
  dir: string;
  nginx: string;
  intervalMs: number;
}

/** How long the events stream waits before it is opened again after it ended or failed. */
const STREAM_RETRY_MS = 2_000;

const say = (line: string) => process.stdout.write(`${new Date().toISOString()} ${line}\n`);

/** Runs nginx with `args` after the words of `--nginx`; throws with nginx's own complaint. */
function nginxRunner(command: string): (args: string[]) => void {
  const [file, ...base] = command.split(/\s+/).filter(Boolean);
  if (!file) throw new BadInputError('--nginx: empty command');
  return (args) => {
    try {
      execFileSync(file, [...base, ...args], { stdio: 'pipe' });
    } catch (err) {
      const stderr = String((err as { stderr?: Buffer }).stderr ?? '').trim();
      throw new Error(`${[file, ...base, ...args].join(' ')} failed${stderr ? `: ${stderr}` : ''}`);
    }
  };
}

/**
 * Wakes `wake` on every chunk of the fleet's audit log (`events?follow=1`, SSE): a committed route is an event,
 * so nginx follows it within one read instead of at the next interval. Opened again after it ends; while it
 * fails, the interval alone does the work, and the failure is said once each time.
 */
async function wakeOnEvents(api: ApiClient, fleet: string, wake: () => void, signal: AbortSignal): Promise<void> {
  while (!signal.aborted) {
    try {
      const res = await api.stream(`/v1/fleets/${encodeURIComponent(fleet)}/events?follow=1`, signal);
      const reader = res.body!.getReader();
      for (;;) {
        const { done } = await reader.read();
        if (done) break;
        wake();
      }
    } catch (err) {
      if (signal.aborted) return;
      say(`events stream: ${(err as Error).message}; following route intent every interval meanwhile`);
    }
    await new Promise((resolve) => setTimeout(resolve, STREAM_RETRY_MS));
  }
}

/**
 * `haru gateway nginx`: keeps an nginx in front of the fleet's models on the route intent. On every routing
 * change (an event of the fleet, or the interval) it writes `upstreams.conf` and `locations.conf` under `--dir`
 * (deploy/route-intent/nginx.ts), runs `<nginx> -t`, and `<nginx> -s reload`: nginx's workers finish what they
 * serve, so a planned promotion costs no client request. A configuration nginx refuses is taken back and
 * reported; the loop goes on. Runs until SIGINT or SIGTERM.
 */
export async function runNginxGateway(api: ApiClient, opts: NginxOptions, signal: AbortSignal): Promise<void> {
  const nginx = nginxRunner(opts.nginx);
  const follower = followRouteIntent({
    read: () => api.get(`/v1/fleets/${encodeURIComponent(opts.fleet)}/route-intent`, routeIntentSchema),
    dir: opts.dir,
    check: () => nginx(['-t', '-q']),
    reload: () => nginx(['-s', 'reload']),
  });
  let wake = () => undefined as void;
  void wakeOnEvents(api, opts.fleet, () => wake(), signal);
  while (!signal.aborted) {
    try {
      const { changed, intent } = await follower.tick();
      if (changed) {
        const active = intent.active ? `${intent.active.domainSlug}` : 'none';
        say(`fleet ${intent.fleetSlug} route revision ${intent.revision}: active ${active}; nginx reloaded`);
      }
    } catch (err) {
      say(`nginx keeps its routing: ${(err as Error).message}`);
    }
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, opts.intervalMs);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
      signal.addEventListener('abort', () => wake(), { once: true });
    });
  }
}

export function register(program: Command): void {
  const gateway = program.command('gateway').description('keep a gateway in front of the models on the route intent');
  gateway
    .command('nginx')
    .description(
      'write nginx include files from the fleet route intent on every change, test them with nginx -t and reload nginx',
    )
    .requiredOption('--fleet <fleet>', 'fleet slug or id')
    .requiredOption(
      '--dir <dir>',
      'where upstreams.conf (for http {}) and locations.conf (for a server {}) are written',
    )
    .option('--nginx <command>', 'the nginx command, with the options that find its configuration', 'nginx')
    .option('--interval-ms <ms>', 'longest time between two reads of the route intent', integerArg(100, 600_000), 1_000)
    .action(async (opts: NginxOptions, cmd: Command) => {
      const api = apiClientFor(cmd);
      const stop = new AbortController();
      for (const s of ['SIGINT', 'SIGTERM'] as const) process.once(s, () => stop.abort());
      await runNginxGateway(api, opts, stop.signal);
    });
}
