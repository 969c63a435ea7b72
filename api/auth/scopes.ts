import { z } from 'zod';

/**
 * What an API key may do (docs/architecture.md §5.3). `inference`: the OpenAI-compatible proxy and
 * `/v1/models`. `read`: every GET of the control plane (fleets, health, route intent, operations, events,
 * a domain's status). `operate`: steer a fleet (promote, demote, abort, pause, resume, reconcile, repair,
 * submit and cancel training jobs of the layout's templates). `admin`: run work on hosts (provision, teardown).
 */
export const SCOPES = ['inference', 'read', 'operate', 'admin'] as const;
export const scopeSchema = z.enum(SCOPES);
export type Scope = z.infer<typeof scopeSchema>;

/**
 * The scopes each scope also grants. The control plane is a ladder (admin ⊇ operate ⊇ read): whoever may
 * steer a fleet must see it, and whoever provisions hosts may steer. `inference` stands apart both ways: the
 * keys handed to chat clients see no topology (route intent names every serving URL), and a control key
 * spends no GPU time unless it is given `inference` too.
 */
const GRANTS: Record<Scope, readonly Scope[]> = {
  inference: ['inference'],
  read: ['read'],
  operate: ['operate', 'read'],
  admin: ['admin', 'operate', 'read'],
};

/** Whether a key holding `held` may use a route that needs `needed`. */
export const grants = (held: readonly Scope[], needed: Scope): boolean =>
  held.some((scope) => GRANTS[scope].includes(needed));
