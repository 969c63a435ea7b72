import type { z } from 'zod';
import type { Scope } from './auth/scopes';

/** One documented route. `path` is written the Express way (`/v1/fleets/:fleet`). */
export interface RouteDoc {
  method: 'get' | 'post';
  path: string;
  summary: string;
  tag: 'health' | 'fleets' | 'operations' | 'events' | 'training' | 'inference' | 'meta';
  /**
   * The scope a key needs for this route (docs/architecture.md §5.3), or null for an open route (health,
   * metrics, this document). The one place a route's scope is declared: the API guards each
   * route by it (api/auth/authorize.ts) and the OpenAPI document publishes it.
   */
  scope: Scope | null;
  query?: z.ZodObject;
  body?: z.ZodType;
  responses: Record<number, { description: string; schema?: z.ZodType; contentType?: string }>;
}
