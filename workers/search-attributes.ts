import type { NativeConnection } from '@temporalio/worker';
import { temporal } from '@temporalio/proto';
import { searchAttributes } from '../workflows/definitions';

const KEYWORD = temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD;

/**
 * Registers Haru's search attributes (`HaruFleet`, `HaruDomain`, `HaruOperation`, all Keyword) on the
 * namespace unless they exist. Returns the names it added. Needs the operator API (a self-hosted server
 * or the dev server; on Temporal Cloud register them in the console).
 */
export async function ensureSearchAttributes(connection: NativeConnection, namespace: string): Promise<string[]> {
  const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
  const missing = Object.values(searchAttributes)
    .map((key) => key.name)
    .filter((name) => !customAttributes || !(name in customAttributes));
  if (missing.length === 0) return [];
  await connection.operatorService.addSearchAttributes({
    namespace,
    searchAttributes: Object.fromEntries(missing.map((name) => [name, KEYWORD])),
  });
  return missing;
}
