import { z } from 'zod';

/**
 * The NOTIFY channel of served answers: the proxy writes to it when it relays a successful answer from a
 * domain, and the fleet monitor listens on it. Users being served is proof the domain is alive, whatever its
 * supervisor answers.
 */
export const SERVED_ANSWER_CHANNEL = 'haru_served_answer';

/**
 * One served answer: the domain that answered and when by the proxy's clock (ISO, for whoever reads the
 * channel). The monitor dates it by its own clock when it hears it, never by `at`. Lenient: a listener needs
 * only these.
 */
export const servedAnswerPushSchema = z.object({ domainId: z.string(), at: z.string() });
export type ServedAnswerPush = z.infer<typeof servedAnswerPushSchema>;
