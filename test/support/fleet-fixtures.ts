/** The fixed ids, clock and domain snapshot builder of `core/fleet-fixtures.ts`, under the names activity tests use. */
import { ID, NOW } from '../../core/fleet-fixtures';

export { domainSnapshot } from '../../core/fleet-fixtures';
export const IDS = ID;
export const T0 = NOW.toISOString();
