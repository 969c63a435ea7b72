import { z } from 'zod';

/**
 * The NOTIFY channel the proxy writes to when it relays a successful answer from a domain, and the fleet
 * monitor listens on: users being served is proof the domain is alive, whatever its supervisor answers.
 */
export const SERVED_CHANNEL = 'haru_served';

/**
 * One proof of life: the domain that answered and when by the proxy's clock (ISO, for whoever reads the channel).
 * The monitor dates it by its own clock when it hears it, never by `at`. Lenient: a listener needs only these.
 */
export const servedPushSchema = z.object({ domainId: z.string(), at: z.string() });
export type ServedPush = z.infer<typeof servedPushSchema>;
