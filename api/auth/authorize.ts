import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Express } from 'express';
import { type BearerMiddleware, bearerIdentify } from '../../lib/bearer-auth';
import { HaruError } from '../../schemas/errors';
import { requestFleet } from '../proxy/proxy-once';
import type { RouteDoc } from '../route-doc';
import type { ApiKey } from './api-key';
import { principalOf, setPrincipal } from './principal';
import { grants } from './scopes';

type Next = (err?: unknown) => void;
/** Checks one request against its route's declared scope (and the key's fleets); ends in `next`. */
export type RouteGuard = (req: IncomingMessage & { params?: unknown }, res: ServerResponse, next: Next) => void;

/** A fleet as far as a key's limit cares: what the key may name it by. */
export interface FleetName {
  id: string;
  slug: string;
}

export interface AuthorizerOptions {
  /** Every key the API accepts (api/auth/api-key.ts); none: the API is open (it then binds to loopback only). */
  keys: readonly ApiKey[];
  /** The fleet a slug or UUID names, or null when there is none (a store that cannot answer throws). */
  resolveFleet: (ref: string) => Promise<FleetName | null>;
  /** HARU_DEFAULT_FLEET: the fleet of a proxy request without `X-Haru-Fleet`. */
  defaultFleet: string | undefined;
}

export interface Authorizer {
  /** The bearer check of every `/v1/*` request: 401 without a known key, else the key is the request's principal. */
  authenticate: BearerMiddleware;
  /**
   * The check of the fleet page (`/ui`): `authenticate`, and the key also taken as HTTP Basic's password (any
   * user name), the one credential a browser sends without JavaScript; a refusal asks the browser for it.
   */
  authenticatePage: BearerMiddleware;
  /** The guard of the route `doc` declares: its scope, then its fleet. Throws for a route that declares none. */
  guardFor(method: string, path: string): RouteGuard;
  /** Whether a key limited to fleets may see `fleet` (lists leave out the others). */
  allows(key: ApiKey | undefined, fleet: FleetName): boolean;
}

/** What a browser is asked for: a user name (any) and the key as the password. */
const BASIC_CHALLENGE = 'Basic realm="haru", charset="UTF-8"';

/** The password of `Basic base64(user:password)`; undefined for any other header. */
export function basicPassword(authorization: string | undefined): string | undefined {
  const encoded = /^Basic +([A-Za-z0-9+/=]+)\s*$/i.exec(authorization ?? '')?.[1];
  if (!encoded) return undefined;
  const decoded = Buffer.from(encoded, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? undefined : decoded.slice(colon + 1);
}

const keyAllows = (key: ApiKey | undefined, fleet: FleetName): boolean =>
  !key?.fleets || key.fleets.includes(fleet.slug) || key.fleets.includes(fleet.id);

const routeKey = (method: string, path: string) => `${method.toLowerCase()} ${path}`;

/**
 * Builds the API's authorization from its keys and the route table: authentication (401 `unauthorized`),
 * then per route the scope its RouteDoc declares (403 `forbidden` naming it) and, for a key limited to
 * fleets, the fleet the request is for (the path's `:fleet`, or a proxy request's `X-Haru-Fleet` /
 * HARU_DEFAULT_FLEET). A fleet outside the key's list is 403 whether or not it exists, so a limited key
 * cannot probe for other fleets.
 */
export function createAuthorizer(docs: readonly RouteDoc[], opts: AuthorizerOptions): Authorizer {
  const isOpen = opts.keys.length === 0;
  const identify = bearerIdentify(opts.keys.map((key) => ({ digest: key.digest, value: key })));

  const authenticate: BearerMiddleware = (req, res, next) => {
    if (isOpen) return next();
    const found = identify(req.headers.authorization);
    if ('value' in found) {
      setPrincipal(req, found.value);
      return next();
    }
    res.setHeader('www-authenticate', 'Bearer');
    next(new HaruError('unauthorized', found.refusal));
  };

  const authenticatePage: BearerMiddleware = (req, res, next) => {
    if (isOpen) return next();
    const password = basicPassword(req.headers.authorization);
    // Basic's password goes through the one bearer check, in the form it reads.
    const found = identify(password === undefined ? req.headers.authorization : `Bearer ${password}`);
    if ('value' in found) {
      setPrincipal(req, found.value);
      return next();
    }
    res.setHeader('www-authenticate', [BASIC_CHALLENGE, 'Bearer']);
    next(new HaruError('unauthorized', found.refusal));
  };

  async function checkFleet(key: ApiKey, ref: string): Promise<void> {
    if (key.fleets!.includes(ref)) return;
    // Named otherwise (its UUID for a listed slug, or the reverse): resolve it before refusing.
    const fleet = await opts.resolveFleet(ref);
    if (fleet && keyAllows(key, fleet)) return;
    throw new HaruError('forbidden', `key "${key.name}" may not act on fleet ${ref}`);
  }

  const guard = (doc: RouteDoc): RouteGuard => {
    const scope = doc.scope;
    if (scope === null) return (_req, _res, next) => next();
    const what = `${doc.method.toUpperCase()} ${doc.path}`;
    const hasFleetParam = doc.path.includes(':fleet');
    const fleetRef = (req: IncomingMessage & { params?: unknown }): string | undefined =>
      hasFleetParam
        ? (req.params as Record<string, string> | undefined)?.fleet
        : doc.tag === 'inference'
          ? requestFleet(req, opts.defaultFleet)
          : undefined;
    return (req, _res, next) => {
      if (isOpen) return next();
      const key = principalOf(req);
      // Fail closed: a scoped route reached without authentication (mounted outside /v1) is refused.
      if (!key) return next(new HaruError('unauthorized', 'missing bearer token'));
      if (!grants(key.scopes, scope)) {
        return next(new HaruError('forbidden', `key "${key.name}" lacks the "${scope}" scope ${what} needs`));
      }
      if (!key.fleets) return next();
      let ref: string | undefined;
      try {
        ref = fleetRef(req);
      } catch (err) {
        return next(err);
      }
      if (ref === undefined) return next();
      checkFleet(key, ref).then(() => next(), next);
    };
  };

  const guards = new Map(docs.map((doc) => [routeKey(doc.method, doc.path), guard(doc)]));
  return {
    authenticate,
    authenticatePage,
    guardFor(method, path) {
      const found = guards.get(routeKey(method, path));
      if (!found) throw new Error(`route ${method.toUpperCase()} ${path} has no RouteDoc: declare its scope there`);
      return found;
    },
    allows: keyAllows,
  };
}

interface Layer {
  route?: { path: string; methods: Record<string, boolean>; stack: unknown[] } & Record<string, unknown>;
  handle?: { stack?: Layer[] };
}

/**
 * Puts each route's guard first in the route itself, so it runs exactly when Express matched that route
 * (any spelling Express accepts) with its `:fleet` parsed. A route without a RouteDoc stops the API at
 * start: a route nobody gave a scope must not serve.
 */
export function installRouteGuards(app: Express, authorizer: Authorizer): void {
  const walk = (stack: Layer[]) => {
    for (const layer of stack) {
      const route = layer.route;
      if (route) {
        for (const [method, on] of Object.entries(route.methods)) {
          if (!on) continue;
          // Route#<method> appends a layer for that method; moved to the front it runs before the handlers.
          (route[method] as (fn: RouteGuard) => void).call(route, authorizer.guardFor(method, route.path));
          route.stack.unshift(route.stack.pop());
        }
      } else if (layer.handle?.stack) walk(layer.handle.stack);
    }
  };
  walk((app as unknown as { router: { stack: Layer[] } }).router.stack);
}
