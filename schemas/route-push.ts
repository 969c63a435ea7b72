import { z } from 'zod';

/** The NOTIFY channel `commitRouting` writes to and every API process listens on. */
export const ROUTE_CHANNEL = 'haru_route';

/**
 * A route push: the fleet whose pointer moved and the revision it moved to (`activeDomainId` is sent too;
 * listeners re-read the snapshot, so it is informational). Lenient: a listener needs only these fields.
 */
export const routePushSchema = z.object({ fleetId: z.string(), revision: z.number().int() });
export type RoutePush = z.infer<typeof routePushSchema>;
