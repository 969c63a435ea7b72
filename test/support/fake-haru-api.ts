/**
 * A stand-in Haru API for `haru` command tests: a local HTTP server answering fixed JSON per path, recording
 * each request (path, Authorization header), and fixtures of what the real API answers (fleet, operations,
 * events), checked against the CLI's own schemas so a fixture cannot drift from the API's shape.
 */
import type http from 'node:http';
import { domainSnapshot, ID } from '../../core/fleet-fixtures';
import { fleetStatusSchema, operationListResponseSchema, eventListResponseSchema } from '../../schemas/api';
import type { FleetStatus } from '../../schemas/api';
import type { HaruEvent, Operation } from '../../schemas/entities';
import { defaultFleetPolicy } from '../../schemas/policy';
import { listenLocal, type LocalServer } from './local-server';

export interface SeenRequest {
  path: string;
  authorization: string | undefined;
}

/** An answer: a JSON body with a status, or a function of the request that answers itself. */
export type FakeRoute =
  { status?: number; body: unknown } | ((req: http.IncomingMessage, res: http.ServerResponse) => void);

export interface FakeApi extends LocalServer {
  seen: SeenRequest[];
}

/** Serves `routes` (path with query as the key, else the path alone); anything else is 404 `fleet_not_found`. */
export async function startFakeApi(routes: Record<string, FakeRoute>): Promise<FakeApi> {
  const seen: SeenRequest[] = [];
  const server = await listenLocal((req, res) => {
    const url = req.url ?? '/';
    seen.push({ path: url, authorization: req.headers.authorization });
    const route = routes[url] ?? routes[url.split('?')[0]!];
    if (typeof route === 'function') return route(req, res);
    const status = route ? (route.status ?? 200) : 404;
    const body = route ? route.body : { error: { code: 'fleet_not_found', message: `no route ${url}` } };
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  });
  return { ...server, seen };
}

const T = '2030-01-01T00:00:00.000Z';

/** Fleet `prod`: `a` active, `b` standby, both heard 1 s before `T`. */
export function fleetStatusFixture(overrides: Partial<FleetStatus> = {}): FleetStatus {
  const sighting = { lastSeenAt: T, ageMs: 1_000, isStale: false, isReportCurrent: true };
  return fleetStatusSchema.parse({
    id: ID.fleet,
    slug: 'prod',
    displayName: 'prod',
    activeDomainId: ID.a,
    routeRevision: 3,
    policy: defaultFleetPolicy(),
    autoFailoverPause: null,
    createdAt: T,
    updatedAt: T,
    domains: [
      { ...domainSnapshot('a'), sighting },
      { ...domainSnapshot('b'), sighting },
    ],
    inFlightOperation: null,
    ...overrides,
  });
}

/** A finished promotion of `b` (from `a`) created at `createdAt`. */
export function promotionFixture(id: string, createdAt: string, overrides: Partial<Operation> = {}): Operation {
  return operationListResponseSchema.parse({
    operations: [
      {
        id,
        fleetId: ID.fleet,
        kind: 'promote',
        targetDomainId: ID.b,
        fromDomainId: ID.a,
        state: 'succeeded',
        step: 'demoteOldActive',
        reason: 'drill',
        requestedBy: 'api',
        workflowId: `haru/${ID.fleet}/op/${id}`,
        routingCommitted: true,
        routeRevision: 3,
        error: null,
        createdAt,
        startedAt: createdAt,
        finishedAt: createdAt,
        ...overrides,
      },
    ],
  }).operations[0]!;
}

/** The `operation.step` event the workflow records when a step fails. */
export function stepFailedEvent(id: number, operationId: string, step: string, message: string): HaruEvent {
  return eventListResponseSchema.parse({
    events: [
      {
        id,
        fleetId: ID.fleet,
        operationId,
        domainId: null,
        type: 'operation.step',
        message: `${step} failed: ${message}`,
        data: { step, status: 'failed', code: 'SupervisorUnreachable' },
        createdAt: T,
      },
    ],
    nextCursor: id,
  }).events[0]!;
}
