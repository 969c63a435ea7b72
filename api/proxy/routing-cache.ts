import type { FleetSnapshot } from '../../schemas/entities';
import { HaruError } from '../../schemas/errors';
import { ROUTE_CHANNEL, type RoutePush, routePushSchema } from '../../schemas/route-push';
import type { Logger } from '../../lib/logger';
import type { ApiStore } from '../store';

/** A routing answer: the snapshot and whether it is the last known one, served while the store is down. */
export interface Routing {
  snapshot: FleetSnapshot;
  stale: boolean;
}

/**
 * Fleets kept in the routing cache (and unknown names remembered): a snapshot is a few KiB, and an API serves
 * far fewer fleets than this; past it the least recently used is read from the store again.
 */
export const ROUTING_CACHE_MAX_FLEETS = 1_000;

export interface RoutingCacheOptions {
  /** Only the routing reads: the cache never writes. */
  store: { fleets: Pick<ApiStore['fleets'], 'list' | 'snapshot' | 'routeRevision'> };
  /** An entry younger than this is used without touching the store. */
  ttlMs: number;
  /**
   * Most fleets cached (and most unknown names remembered); the least recently used is evicted first. Default
   * ROUTING_CACHE_MAX_FLEETS.
   */
  maxEntries?: number;
  /** How long a name the store does not know answers `fleet_not_found` without a store read (default ttlMs). */
  missTtlMs?: number;
  /** Bound on one store read; past it the last known routing is served (stale). */
  storeTimeoutMs: number;
  now?: () => Date;
  logger?: Logger;
  /** Called whenever a fleet's revision is observed (metrics). */
  onRevision?: (snapshot: FleetSnapshot) => void;
}

export interface RoutingCache {
  /**
   * The fleet's routing (slug or UUID). Fresh within the TTL; past it, revalidated with a cheap route
   * revision read and reloaded only when the revision moved. Throws `fleet_not_found` (remembered for
   * `missTtlMs`, so a flood of requests for an unknown fleet makes one store read per interval), or
   * `state_store_unavailable` when the store cannot be read and nothing is cached.
   */
  get(ref: string): Promise<Routing>;
  /** Like `get` but always reads the full snapshot (used before deciding to hold a request). */
  refresh(ref: string): Promise<Routing>;
  /** Applies a `haru_route` payload: a newer revision invalidates the entry and wakes waiters. */
  handlePush(payload: string): void;
  /** Calls `listener(fleetId, revision)` whenever a fleet's route is seen to move; returns an unsubscribe. */
  onMove(listener: (fleetId: string, revision: number) => void): () => void;
  /** Number of cached fleets (bounded by maxEntries). */
  readonly size: number;
}

interface Entry {
  snapshot: FleetSnapshot;
  /** Last time the store confirmed this entry (full load or revision check). */
  checkedAt: number;
  loadedAt: number;
  /** A push announced a newer revision: reload before use. */
  invalidated: boolean;
  /** After a failed store read, serve stale without retrying until this time. */
  backoffUntil: number;
}

/** A full reload happens at least every FULL_RELOAD_TTLS TTLs, so non-routing changes (states, slots) show up. */
const FULL_RELOAD_TTLS = 10;

/** Creates the bounded LRU snapshot cache the proxy routes from. */
export function createRoutingCache(opts: RoutingCacheOptions): RoutingCache {
  const now = () => (opts.now ? opts.now().getTime() : Date.now());
  const maxEntries = opts.maxEntries ?? ROUTING_CACHE_MAX_FLEETS;
  const entries = new Map<string, Entry>(); // fleetId -> entry, insertion order = recency
  const aliases = new Map<string, string>(); // slug or id -> fleetId
  const inflight = new Map<string, Promise<Routing>>();
  const misses = new Map<string, number>(); // unknown slug or id -> until when it is known missing
  const missTtlMs = opts.missTtlMs ?? opts.ttlMs;
  const rememberMiss = (ref: string) => {
    misses.delete(ref);
    if (misses.size >= maxEntries) misses.delete(misses.keys().next().value as string);
    misses.set(ref, now() + missTtlMs);
  };
  const knownMissing = (ref: string): boolean => {
    const until = misses.get(ref);
    if (until === undefined) return false;
    if (now() < until) return true;
    misses.delete(ref);
    return false;
  };
  const notFound = (ref: string) => new HaruError('fleet_not_found', `fleet ${ref} not found`);
  const listeners = new Set<(fleetId: string, revision: number) => void>();

  const touch = (id: string, entry: Entry) => {
    entries.delete(id);
    entries.set(id, entry);
    while (entries.size > maxEntries) {
      const oldest = entries.keys().next().value as string;
      entries.delete(oldest);
      for (const [alias, target] of aliases) if (target === oldest) aliases.delete(alias);
    }
  };
  const emitMove = (fleetId: string, revision: number) => {
    for (const l of listeners) l(fleetId, revision);
  };

  const bounded = <T>(what: string, p: Promise<T>): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new HaruError('state_store_unavailable', `state store did not answer ${what} in time`)),
        opts.storeTimeoutMs,
      );
      p.then(
        (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err);
        },
      );
    });

  const store = (snapshot: FleetSnapshot, previous: Entry | undefined): Entry => {
    const t = now();
    const entry: Entry = { snapshot, checkedAt: t, loadedAt: t, invalidated: false, backoffUntil: 0 };
    aliases.set(snapshot.slug, snapshot.id);
    aliases.set(snapshot.id, snapshot.id);
    touch(snapshot.id, entry);
    opts.onRevision?.(snapshot);
    if (previous && snapshot.routeRevision > previous.snapshot.routeRevision)
      emitMove(snapshot.id, snapshot.routeRevision);
    return entry;
  };

  const stale = (ref: string, entry: Entry | undefined, err: unknown): Routing => {
    if (!entry) {
      if (err instanceof HaruError) throw err;
      throw new HaruError('state_store_unavailable', 'state store is unreachable and no routing is cached');
    }
    entry.backoffUntil = now() + opts.ttlMs;
    opts.logger?.warn('serving stale routing', {
      fleet: ref,
      revision: entry.snapshot.routeRevision,
      error: err instanceof Error ? err.message : String(err),
    });
    return { snapshot: entry.snapshot, stale: true };
  };

  async function load(ref: string, entry: Entry | undefined, full: boolean): Promise<Routing> {
    try {
      const cheap = entry && !full && !entry.invalidated && now() - entry.loadedAt < opts.ttlMs * FULL_RELOAD_TTLS;
      if (cheap) {
        const revision = await bounded('a route revision read', opts.store.fleets.routeRevision(entry.snapshot.id));
        if (revision === entry.snapshot.routeRevision) {
          entry.checkedAt = now();
          entry.backoffUntil = 0;
          return { snapshot: entry.snapshot, stale: false };
        }
      }
      const snapshot = await bounded('a fleet snapshot read', opts.store.fleets.snapshot(ref));
      if (!snapshot) {
        if (entry) entries.delete(entry.snapshot.id);
        aliases.delete(ref);
        rememberMiss(ref);
        throw notFound(ref);
      }
      misses.delete(ref);
      return { snapshot: store(snapshot, entry).snapshot, stale: false };
    } catch (err) {
      if (err instanceof HaruError && err.code === 'fleet_not_found') throw err;
      return stale(ref, entry, err);
    }
  }

  // One store read per fleet at a time: concurrent requests share it.
  function singleFlight(ref: string, entry: Entry | undefined, full: boolean): Promise<Routing> {
    const key = `${entry?.snapshot.id ?? ref}:${full ? 'full' : 'check'}`;
    let p = inflight.get(key);
    if (!p) {
      p = load(ref, entry, full).finally(() => inflight.delete(key));
      inflight.set(key, p);
    }
    return p;
  }

  const lookup = (ref: string) => {
    const id = aliases.get(ref);
    return id ? entries.get(id) : undefined;
  };

  return {
    get size() {
      return entries.size;
    },
    async get(ref) {
      if (knownMissing(ref)) throw notFound(ref);
      const entry = lookup(ref);
      if (entry) {
        const t = now();
        touch(entry.snapshot.id, entry);
        if (!entry.invalidated && t - entry.checkedAt < opts.ttlMs) return { snapshot: entry.snapshot, stale: false };
        // A pushed move is read at once, backoff or not: the push itself came from the store.
        if (!entry.invalidated && t < entry.backoffUntil) return { snapshot: entry.snapshot, stale: true };
      }
      return singleFlight(ref, entry, false);
    },
    async refresh(ref) {
      if (knownMissing(ref)) throw notFound(ref);
      const entry = lookup(ref);
      if (entry && !entry.invalidated && now() < entry.backoffUntil) return { snapshot: entry.snapshot, stale: true };
      return singleFlight(ref, entry, true);
    },
    handlePush(payload) {
      let parsed: RoutePush;
      try {
        parsed = routePushSchema.parse(JSON.parse(payload));
      } catch {
        opts.logger?.warn('ignored malformed route push', { channel: ROUTE_CHANNEL });
        return;
      }
      misses.delete(parsed.fleetId);
      const entry = entries.get(parsed.fleetId);
      if (entry && parsed.revision <= entry.snapshot.routeRevision) return; // duplicate or out of order
      if (entry) {
        entry.invalidated = true;
        entry.backoffUntil = 0;
      }
      emitMove(parsed.fleetId, parsed.revision);
    },
    onMove(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}
