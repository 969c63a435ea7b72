import type { z } from 'zod';

/** One documented route. `path` is written the Express way (`/v1/fleets/:fleet`). */
export interface RouteDoc {
  method: 'get' | 'post';
  path: string;
  summary: string;
  tag: 'health' | 'fleets' | 'operations' | 'events' | 'inference' | 'meta';
  /** Bearer token required (every /v1/* route). */
  auth: boolean;
  query?: z.ZodObject;
  body?: z.ZodType;
  responses: Record<number, { description: string; schema?: z.ZodType; contentType?: string }>;
}
