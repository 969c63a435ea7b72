import { z } from 'zod';

/**
 * The NOTIFY channel of served answers: the proxy writes to it when it relays a successful answer from a
 * domain, and the fleet monitor listens on it. Users being served is proof the domain is alive, whatever its
 * supervisor answers.
 */
export const SERVED_ANSWER_CHANNEL = 'haru_served_answer';

/**
 * One served answer: the domain that answered and when by the proxy's clock (ISO, for whoever reads the
 * channel). With `missed`, the opposite, on the same channel so that a listener hears both in the order they
 * happened: a missed answer, the proxy sent the domain a request and got no answer (`missed` says why: the
 * connection refused or reset before any header, or no headers within the proxy's timeout). The monitor dates
 * either by its own clock when it hears it, never by `at`. Lenient: a listener needs only these.
 */
export const servedAnswerPushSchema = z.object({
  domainId: z.string(),
  at: z.string(),
  missed: z.string().max(500).optional(),
});
export type ServedAnswerPush = z.infer<typeof servedAnswerPushSchema>;
