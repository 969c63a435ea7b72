/**
 * nginx following Haru's route intent (`GET /v1/fleets/:fleet/route-intent`, schemas/route-intent.ts): renders
 * one upstream per model from the targets that are `eligible` with `weight > 0` (today only the active), and a
 * `location /models/<name>/` per model that proxies there or answers 503 when no target may take the model.
 * `followRouteIntent` reads it, rewrites both include files when the routing changed, has nginx test them and
 * reload; `haru gateway nginx` (cli/commands/gateway.ts) runs it on every routing change.
 */
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { type RouteIntent, routeIntentSchema } from '../../schemas/route-intent';

/** The two include files: `upstreams` goes in `http {}`, `locations` in a `server {}`. */
export interface NginxRouting {
  upstreams: string;
  locations: string;
}

const upstreamName = (index: number) => `haru_model_${index}`;
// A model name goes in a location path and a comment: refuse what nginx would read as syntax.
const SAFE_NAME = /^[A-Za-z0-9._\-/:]+$/;

/** Renders nginx's routing for `intent`. Pure; throws on a model name nginx cannot carry safely. */
export function renderNginxRouting(intent: RouteIntent): NginxRouting {
  const targets = [intent.active, ...intent.standbys].filter((t) => t !== null && t.eligible && t.weight > 0);
  const names = [...new Set([intent.active, ...intent.standbys].flatMap((t) => t?.models.map((m) => m.name) ?? []))];
  const header = `# fleet ${intent.fleetSlug}, route revision ${intent.revision}, generated ${intent.generatedAt}\n`;
  const upstreams: string[] = [header];
  const locations: string[] = [header];
  names.forEach((name, index) => {
    if (!SAFE_NAME.test(name)) throw new Error(`model name ${JSON.stringify(name)} cannot go in an nginx location`);
    const servers = targets.flatMap((t) =>
      t!.models
        .filter((m) => m.name === name && m.eligible)
        .map((m) => ({ url: new URL(m.servingUrl), weight: t!.weight })),
    );
    if (servers.length === 0) {
      locations.push(
        `location /models/${name}/ {\n    default_type application/json;\n    return 503 '{"error":{"code":"domain_unavailable","message":"no eligible domain serves ${name}"}}';\n}\n`,
      );
      return;
    }
    const lines = servers.map((s) => `    server ${s.url.host} weight=${s.weight};`);
    upstreams.push(`upstream ${upstreamName(index)} {\n${lines.join('\n')}\n    keepalive 16;\n}\n`);
    // The servingUrl's path (a base that may end in /v1) is kept: /models/<name>/v1/... -> <servingUrl path>/...
    const base = servers[0]!.url.pathname.replace(/\/+$/, '').replace(/\/v1$/, '');
    locations.push(
      `location /models/${name}/ {\n    proxy_pass http://${upstreamName(index)}${base}/;\n    proxy_http_version 1.1;\n    proxy_set_header Connection "";\n    proxy_buffering off;\n    proxy_read_timeout 300s;\n}\n`,
    );
  });
  return { upstreams: upstreams.join('\n'), locations: locations.join('\n') };
}

/** What decides a reload: the revision and every target's eligibility and weight (not `generatedAt`). */
const routingKey = (intent: RouteIntent) => JSON.stringify([intent.revision, intent.active, intent.standbys]);

const INCLUDE_FILES = ['upstreams.conf', 'locations.conf'] as const;

/** Writes `text` to `file` through a temporary file and a rename: nginx never reads half a file. */
function replaceFile(file: string, text: string): void {
  const temporary = `${file}.${process.pid}.tmp`;
  writeFileSync(temporary, text);
  renameSync(temporary, file);
}

const readOrNull = (file: string): string | null => {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
};

/**
 * One follower of a fleet's route intent for nginx. `tick` reads it once (`read`, which throws when the API
 * answers an error or a body that is not route intent) and, when the routing changed, writes `upstreams.conf`
 * and `locations.conf` under `dir`, has nginx test the whole configuration (`check`, which throws with nginx's
 * complaint), and asks it to `reload`; it returns whether it did. A configuration nginx refuses is taken back
 * (the files as they were) before the error is thrown, so nginx keeps serving what it had and the next tick tries
 * again.
 */
export function followRouteIntent(opts: {
  read: () => Promise<RouteIntent>;
  dir: string;
  check?: () => void;
  reload: () => void;
}): { tick(): Promise<{ changed: boolean; intent: RouteIntent }> } {
  let last: string | null = null;
  return {
    async tick() {
      const intent = routeIntentSchema.parse(await opts.read());
      const key = routingKey(intent);
      if (key === last) return { changed: false, intent };
      const rendered = renderNginxRouting(intent);
      const files = INCLUDE_FILES.map((name) => {
        const file = path.join(opts.dir, name);
        return {
          file,
          before: readOrNull(file),
          next: rendered[name === 'upstreams.conf' ? 'upstreams' : 'locations'],
        };
      });
      for (const f of files) replaceFile(f.file, f.next);
      try {
        opts.check?.();
      } catch (err) {
        for (const f of files) {
          if (f.before === null) rmSync(f.file, { force: true });
          else replaceFile(f.file, f.before);
        }
        throw err;
      }
      opts.reload();
      last = key;
      return { changed: true, intent };
    },
  };
}
