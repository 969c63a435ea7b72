import { z } from 'zod';
import {
  abortRequestSchema,
  demoteRequestSchema,
  eventListResponseSchema,
  eventsQuerySchema,
  fleetListResponseSchema,
  fleetStatusSchema,
  operationDetailSchema,
  operationListResponseSchema,
  promoteRequestSchema,
  promoteResponseSchema,
} from '../schemas/api';
import {
  healthzResponseSchema,
  modelListResponseSchema,
  operationAcceptedResponseSchema,
  operationsQuerySchema,
  readyzResponseSchema,
  reconcileRequestSchema,
  reconcileResponseSchema,
} from '../schemas/api-responses';
import { errorBodySchema } from '../schemas/errors';
import { routeIntentSchema } from '../schemas/route-intent';
import type { RouteDoc } from './route-doc';
import { PAUSE_ROUTE_DOCS } from './routes/pause';
import { REPAIR_ROUTE_DOCS } from './routes/repair';
import { PROVISIONING_ROUTE_DOCS } from './routes/provisioning';
import { STATUS_ROUTE_DOCS } from './routes/status';
import { TRAINING_ROUTE_DOCS } from './routes/training-jobs';
import { UI_ROUTE_DOCS } from './routes/ui';
import { operationSchema } from '../schemas/entities';

const error = (description: string) => ({ description, schema: errorBodySchema });
const common = { 401: error('missing or invalid bearer token (`unauthorized`)') };
/** Every scoped route's 403: written once here, from the scope its RouteDoc declares. */
const forbidden = (scope: string) =>
  error(`the key lacks the \`${scope}\` scope (or one that grants it), or may not act on this fleet (\`forbidden\`)`);
const fleetErrors = { ...common, 404: error('`fleet_not_found`'), 503: error('`state_store_unavailable`') };

/** The OpenAI request bodies: `model` is required and read; everything else is forwarded untouched. */
const inferenceRequestSchema = z.looseObject({ model: z.string().min(1), stream: z.boolean().optional() });
const inferenceResponses = (stream: boolean): RouteDoc['responses'] => ({
  200: {
    description: stream
      ? 'the upstream answer, byte for byte (JSON, or an SSE stream when `stream: true`)'
      : 'the upstream answer, byte for byte',
    schema: z.looseObject({}),
  },
  400: error('bad JSON or no `model` (`invalid_request`)'),
  ...common,
  404: error('`model_not_found` (message lists the routable models) or `fleet_not_found`'),
  413: error('body over HARU_CHAT_MAX_BODY_BYTES (`payload_too_large`)'),
  429: error('the hold queue is full (`overloaded`, with Retry-After)'),
  502: error('connection refused or reset (`upstream_unreachable`)'),
  503: error('`no_active_domain` or `state_store_unavailable`'),
  504: error('no response headers within HARU_CHAT_HEADER_TIMEOUT_MS (`upstream_timeout`)'),
});

/** Every route the API serves, in one table: the OpenAPI document is rendered from it and tests check it against the router. */
export const ROUTE_DOCS: RouteDoc[] = [
  {
    method: 'get',
    path: '/healthz',
    summary: 'Liveness; touches nothing',
    tag: 'health',
    scope: null,
    responses: { 200: { description: 'alive', schema: healthzResponseSchema } },
  },
  {
    method: 'get',
    path: '/readyz',
    summary: 'Readiness: Postgres and Temporal answer',
    tag: 'health',
    scope: null,
    responses: {
      200: { description: 'ready', schema: readyzResponseSchema },
      503: error('`state_store_unavailable` or `orchestrator_unavailable`'),
    },
  },
  {
    method: 'get',
    path: '/openapi.json',
    summary: 'This document (OpenAPI 3.1)',
    tag: 'meta',
    scope: null,
    responses: { 200: { description: 'OpenAPI document', schema: z.looseObject({}) } },
  },
  {
    method: 'get',
    path: '/metrics',
    summary: 'Prometheus metrics',
    tag: 'meta',
    scope: null,
    responses: { 200: { description: 'text exposition format', contentType: 'text/plain' } },
  },
  {
    method: 'get',
    path: '/v1/fleets',
    summary: 'List fleets with their snapshots',
    tag: 'fleets',
    scope: 'read',
    responses: {
      200: { description: 'fleets', schema: fleetListResponseSchema },
      ...common,
      503: error('`state_store_unavailable`'),
    },
  },
  {
    method: 'get',
    path: '/v1/fleets/:fleet',
    summary: 'One fleet by slug or UUID',
    tag: 'fleets',
    scope: 'read',
    responses: {
      200: { description: 'snapshot, each domain with its sighting', schema: fleetStatusSchema },
      ...fleetErrors,
    },
  },
  {
    method: 'post',
    path: '/v1/fleets/:fleet/promote',
    summary: 'Make a domain the active one through a verified promotion',
    tag: 'operations',
    scope: 'operate',
    body: promoteRequestSchema,
    responses: {
      200: { description: 'the target is already active (`already_active`)', schema: promoteResponseSchema },
      202: {
        description: 'operation accepted, or the identical one in flight joined',
        schema: operationAcceptedResponseSchema,
      },
      400: error('`invalid_request`'),
      ...fleetErrors,
      409: error('another operation is in flight (`operation_conflict`)'),
      413: error('body over 16 KiB (`payload_too_large`)'),
      422: error('not in the fleet, not ready/degraded, or no inference models (`invalid_target`)'),
      503: error('`orchestrator_unavailable` or `state_store_unavailable`'),
    },
  },
  {
    method: 'post',
    path: '/v1/fleets/:fleet/demote',
    summary: 'Put a standby domain to sleep and start its training (never the active)',
    tag: 'operations',
    scope: 'operate',
    body: demoteRequestSchema,
    responses: {
      202: { description: 'operation accepted or joined', schema: operationAcceptedResponseSchema },
      400: error('`invalid_request`'),
      ...fleetErrors,
      409: error('`operation_conflict`'),
      413: error('`payload_too_large`'),
      422: error('the active, not in the fleet, or not ready/degraded (`invalid_target`)'),
      503: error('`orchestrator_unavailable` or `state_store_unavailable`'),
    },
  },
  {
    method: 'post',
    path: '/v1/fleets/:fleet/reconcile',
    summary: 'Ask the monitor to check every domain now; answers with the fresh health',
    tag: 'fleets',
    scope: 'operate',
    body: reconcileRequestSchema,
    responses: {
      200: { description: 'fresh health', schema: reconcileResponseSchema },
      400: error('`invalid_request`'),
      ...fleetErrors,
      503: error('`orchestrator_unavailable` or `state_store_unavailable`'),
    },
  },
  {
    method: 'get',
    path: '/v1/fleets/:fleet/route-intent',
    summary: 'Provider-neutral routing answer (active domain, model URLs, revision)',
    tag: 'fleets',
    scope: 'read',
    responses: {
      200: {
        description: 'route intent; `x-haru-routing: stale` while the store is unreachable',
        schema: routeIntentSchema,
      },
      ...fleetErrors,
    },
  },
  {
    method: 'get',
    path: '/v1/fleets/:fleet/operations',
    summary: 'Operation history, newest first',
    tag: 'operations',
    scope: 'read',
    query: operationsQuerySchema,
    responses: {
      200: { description: 'operations', schema: operationListResponseSchema },
      400: error('`invalid_request`'),
      ...fleetErrors,
    },
  },
  {
    method: 'get',
    path: '/v1/fleets/:fleet/operations/:operation',
    summary: "One operation with the workflow's live step progress",
    tag: 'operations',
    scope: 'read',
    responses: {
      200: { description: 'operation', schema: operationDetailSchema },
      ...fleetErrors,
      404: error('`fleet_not_found` or `operation_not_found`'),
    },
  },
  {
    method: 'post',
    path: '/v1/fleets/:fleet/operations/:operation/abort',
    summary: 'Abort a promotion that has not moved the routing pointer',
    tag: 'operations',
    scope: 'operate',
    body: abortRequestSchema,
    responses: {
      200: { description: 'the workflow never started; the operation was cancelled directly', schema: operationSchema },
      202: { description: 'abort signalled to the workflow', schema: operationSchema },
      400: error('`invalid_request`'),
      ...fleetErrors,
      404: error('`fleet_not_found` or `operation_not_found`'),
      409: error('finished, not a promotion, or already committed (`operation_conflict`)'),
      503: error('`orchestrator_unavailable` or `state_store_unavailable`'),
    },
  },
  {
    method: 'get',
    path: '/v1/fleets/:fleet/events',
    summary: 'Audit log after a cursor; `follow=1` streams new events as SSE',
    tag: 'events',
    scope: 'read',
    query: eventsQuerySchema,
    responses: {
      200: {
        description: 'events (JSON), or with follow=1 an SSE stream of `id:`/`data:` frames',
        schema: eventListResponseSchema,
      },
      400: error('`invalid_request`'),
      ...fleetErrors,
    },
  },
  {
    method: 'post',
    path: '/v1/chat/completions',
    summary: 'OpenAI chat completions, proxied to the active domain',
    tag: 'inference',
    scope: 'inference',
    body: inferenceRequestSchema,
    responses: inferenceResponses(true),
  },
  {
    method: 'post',
    path: '/v1/completions',
    summary: 'OpenAI completions, proxied to the active domain',
    tag: 'inference',
    scope: 'inference',
    body: inferenceRequestSchema,
    responses: inferenceResponses(true),
  },
  {
    method: 'post',
    path: '/v1/embeddings',
    summary: 'OpenAI embeddings, proxied to the active domain',
    tag: 'inference',
    scope: 'inference',
    body: inferenceRequestSchema,
    responses: inferenceResponses(false),
  },
  {
    method: 'get',
    path: '/v1/models',
    summary: 'Models routable on the active domain (OpenAI list format)',
    tag: 'inference',
    scope: 'inference',
    responses: {
      200: { description: 'models', schema: modelListResponseSchema },
      ...common,
      404: error('`fleet_not_found`'),
      503: error('`no_active_domain` or `state_store_unavailable`'),
    },
  },
  ...PROVISIONING_ROUTE_DOCS,
  ...PAUSE_ROUTE_DOCS,
  ...STATUS_ROUTE_DOCS,
  ...UI_ROUTE_DOCS,
  ...REPAIR_ROUTE_DOCS,
  ...TRAINING_ROUTE_DOCS,
];

const jsonSchema = (schema: z.ZodType, io: 'input' | 'output') => {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<string, unknown>;
  return rest;
};

/** `/v1/fleets/:fleet` -> `/v1/fleets/{fleet}` */
export const openApiPath = (path: string) => path.replace(/:([A-Za-z_]+)/g, '{$1}');

function operation(doc: RouteDoc): Record<string, unknown> {
  const pathParams = [...doc.path.matchAll(/:([A-Za-z_]+)/g)].map(([, name]) => ({
    name,
    in: 'path',
    required: true,
    schema: { type: 'string' },
    description: name === 'fleet' ? 'fleet slug or UUID' : `${name} id`,
  }));
  const query = doc.query
    ? (jsonSchema(doc.query, 'input') as { properties?: Record<string, unknown>; required?: string[] })
    : undefined;
  const queryParams = Object.entries(query?.properties ?? {}).map(([name, schema]) => ({
    name,
    in: 'query',
    required: query?.required?.includes(name) ?? false,
    schema,
  }));
  const fleetHeader =
    doc.tag === 'inference'
      ? [
          {
            name: 'X-Haru-Fleet',
            in: 'header',
            required: false,
            schema: { type: 'string' },
            description: 'fleet slug or UUID (default HARU_DEFAULT_FLEET)',
          },
        ]
      : [];
  return {
    summary: doc.summary,
    tags: [doc.tag],
    // OpenAPI 3.1 lets a bearer scheme list the roles an operation needs; `x-haru-scope` says the same plainly.
    ...(doc.scope ? { security: [{ bearer: [doc.scope] }], 'x-haru-scope': doc.scope } : { security: [] }),
    parameters: [...pathParams, ...queryParams, ...fleetHeader],
    ...(doc.body
      ? {
          requestBody: {
            required: doc.tag === 'inference',
            content: { 'application/json': { schema: jsonSchema(doc.body, 'input') } },
          },
        }
      : {}),
    responses: Object.fromEntries(
      Object.entries(doc.scope ? { ...doc.responses, 403: forbidden(doc.scope) } : doc.responses).map(([status, r]) => [
        status,
        {
          description: r.description,
          ...(r.schema
            ? { content: { [r.contentType ?? 'application/json']: { schema: jsonSchema(r.schema, 'output') } } }
            : r.contentType
              ? { content: { [r.contentType]: { schema: { type: 'string' } } } }
              : {}),
        },
      ]),
    ),
  };
}

/** Renders the OpenAPI 3.1 document of every route in ROUTE_DOCS, schemas generated from zod. */
export function buildOpenApiDocument(version = '0.1.0'): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const doc of ROUTE_DOCS) (paths[openApiPath(doc.path)] ??= {})[doc.method] = operation(doc);
  return {
    openapi: '3.1.0',
    info: {
      title: 'Haru API',
      version,
      description:
        'Control plane, route intent and OpenAI-compatible proxy of a Haru fleet. Errors: `{ "error": { "code", "message" } }`.',
    },
    components: {
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description:
            'An API key (HARU_API_KEYS_FILE) or HARU_API_TOKEN. Each operation names the scope it needs: `inference`, `read`, `operate` or `admin`; admin grants operate, operate grants read, inference stands apart. HARU_API_TOKEN holds every scope.',
        },
      },
    },
    paths,
  };
}
