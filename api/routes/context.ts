import type { Request } from 'express';
import type { z } from 'zod';
import type { DomainSnapshot, FleetSnapshot } from '../../schemas/entities';
import { formatZodError } from '../../schemas/env';
import { HaruError } from '../../schemas/errors';
import type { ApiConfig } from '../config';
import type { Logger } from '../../lib/logger';
import type { ApiMetrics } from '../metrics';
import type { Orchestrator } from '../orchestrator';
import type { RoutingCache } from '../proxy/routing-cache';
import type { ApiDatabase, ApiStore } from '../store';
import { storeDeadline } from '../timeout';

/** What every route module receives from createApp. */
export interface RouteContext {
  store: ApiStore;
  database: ApiDatabase;
  orchestrator: Orchestrator;
  cache: RoutingCache;
  config: ApiConfig;
  logger: Logger;
  metrics: ApiMetrics;
  now: () => Date;
  /** Aborted when the API shuts down: long-lived answers (event follows) end on it. */
  shutdown: AbortSignal;
}

/** Control-plane store calls wait at most this long (they are not on the hot path, so longer than routing reads). */
export const controlStoreTimeoutMs = (config: ApiConfig) => Math.max(5_000, config.HARU_STORE_TIMEOUT_MS * 10);

/** Parses `value` with `schema`; a failure is a 400 `invalid_request` naming every bad field. */
export function parseWith<T extends z.ZodType>(schema: T, value: unknown, what = 'request'): z.infer<T> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new HaruError('invalid_request', `invalid ${what}: ${formatZodError(parsed.error)}`);
  return parsed.data;
}

/** A route parameter as a string (Express 5 types allow arrays for wildcards). */
export function param(req: Request, name: string): string {
  const value = (req.params as Record<string, string | string[] | undefined>)[name];
  return Array.isArray(value) ? value.join('/') : (value ?? '');
}

/** The fleet named by slug or UUID, read fresh from the store. Throws 404 `fleet_not_found`. */
export async function loadFleet(ctx: RouteContext, ref: string): Promise<FleetSnapshot> {
  const snapshot = await storeDeadline(ctx.store.fleets.snapshot(ref), controlStoreTimeoutMs(ctx.config));
  if (!snapshot) throw new HaruError('fleet_not_found', `fleet ${ref} not found`);
  return snapshot;
}

/** A domain of the fleet by UUID or slug; undefined when it is not in this fleet. */
export function findDomain(snapshot: FleetSnapshot, ref: string): DomainSnapshot | undefined {
  return snapshot.domains.find((d) => d.id === ref || d.slug === ref);
}

export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
