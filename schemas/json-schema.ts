import { z } from 'zod';
import { fleetLayoutSchema } from './layout';
import { supervisorConfigSchema } from './supervisor';

/** The committed JSON Schema files (schemas/json/), generated from the zod schemas. */
export const JSON_SCHEMA_FILES = {
  'fleet-layout.schema.json': fleetLayoutSchema,
  'supervisor-config.schema.json': supervisorConfigSchema,
} as const;

/** Renders one schema as stable, pretty JSON Schema (draft 2020-12) of what a file may contain. */
export function renderJsonSchema(schema: z.ZodType, fileName: string): string {
  const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
  return `${JSON.stringify({ ...json, $id: `https://haru.dev/schemas/${fileName}` }, null, 2)}\n`;
}
