import type { DomainSnapshot, Slot } from '../schemas/entities';
import type { DomainState, Provider, SlotState } from '../schemas/enums';
import type { SupervisorStatus } from '../schemas/supervisor';

/** What one successful poll says about a domain: its health and the state each slot should be in. */
export interface DomainObservation {
  /** `ready` when every model of the layout is known (and awake on the active); otherwise `degraded`. */
  state: 'ready' | 'degraded';
  /** Why the domain is degraded; empty when ready. */
  problems: string[];
  /** Slots whose observed state differs from the stored one. */
  slotChanges: { slotId: string; to: SlotState }[];
}

function observedSlotState(slot: Slot, status: SupervisorStatus): SlotState | null {
  if (slot.kind === 'inference') {
    const states = slot.models.map((m) => status.models.find((s) => s.name === m.name)?.state ?? 'unknown');
    if (states.every((s) => s === 'awake')) return 'serving';
    if (states.every((s) => s === 'asleep')) return 'sleeping';
    return null;
  }
  const run = status.training.find((r) => r.gpuIndex === slot.gpuIndex);
  if (!run) return null;
  if (run.state === 'running') return 'training';
  if (run.state === 'stopping') return 'stopping';
  // An idle run that last exited on its own with an error has crashed; one stopped by us exits by signal.
  return run.lastExit && run.lastExit.code !== null && run.lastExit.code !== 0 ? 'failed' : 'idle';
}

/**
 * How long a missed answer of the proxy (the active sent no answer to a request: refused, reset, or no headers
 * in time) keeps the active degraded while nothing was served after it: three of the proxy's 5 s connect
 * timeouts, so clients failing one request after another keep it degraded, and an active whose clients
 * stopped, or that serves again, is ready again.
 */
export const MISSED_ANSWER_WINDOW_MS = 15_000;

/**
 * The problem a missed answer makes of an active that its supervisor reports healthy (a broken load balancer,
 * security group or route between the proxy and its models), or null when there is none: no miss since the
 * last served answer, or one older than MISSED_ANSWER_WINDOW_MS. Pure.
 */
export function missedAnswerProblem(missed: { atMs: number; why: string } | null, nowMs: number): string | null {
  if (missed === null || nowMs - missed.atMs > MISSED_ANSWER_WINDOW_MS) return null;
  return `the proxy gets no answer from it: ${missed.why}`;
}

/**
 * Interprets one supervisor status for a domain. Pure. The active must have every layout model awake;
 * a standby only needs every model known (asleep is its normal state). A model missing from the status or
 * in state `unknown` makes the domain degraded, unless it is `busy` (alive, its admin endpoints slow). An
 * active the proxy cannot get answers from (`missedAnswer`, from `missedAnswerProblem`) is degraded whatever
 * its supervisor says: the clients' path is what serving means.
 */
export function observeDomain(
  domain: DomainSnapshot,
  isActive: boolean,
  status: SupervisorStatus,
  missedAnswer: string | null = null,
): DomainObservation {
  const problems: string[] = isActive && missedAnswer !== null ? [missedAnswer] : [];
  for (const slot of domain.slots) {
    if (slot.kind !== 'inference') continue;
    for (const binding of slot.models) {
      const model = status.models.find((m) => m.name === binding.name);
      if (!model) problems.push(`model ${binding.name} is not reported`);
      // Busy: alive, its admin endpoints slow; its sleep state is confirmed again once they answer.
      else if (model.state === 'unknown' && model.condition === 'busy') continue;
      else if (model.state === 'unknown')
        problems.push(`model ${binding.name} state unknown${model.error ? `: ${model.error}` : ''}`);
      else if (isActive && model.state !== 'awake')
        problems.push(`model ${binding.name} is ${model.state} on the active`);
    }
  }
  const slotChanges = domain.slots.flatMap((slot) => {
    const to = observedSlotState(slot, status);
    return to && to !== slot.state ? [{ slotId: slot.id, to }] : [];
  });
  return { state: problems.length === 0 ? 'ready' : 'degraded', problems, slotChanges };
}

/**
 * The domain state to write after a successful poll, or null to leave it. ready <-> degraded follow the
 * observation; a failed standby that answers again recovers; a failed active stays failed (only a
 * promotion replaces it); a `static` domain (no provisioning workflow: its hosts exist already) leaves
 * provisioning with its first answer; otherwise provisioning, stopping and stopped belong to their own
 * workflows.
 */
export function nextDomainState(
  current: DomainState,
  isActive: boolean,
  observed: 'ready' | 'degraded',
  provider: Provider = 'static',
): DomainState | null {
  if (current === 'ready' || current === 'degraded') return current === observed ? null : observed;
  if (current === 'failed' && !isActive) return observed;
  if (current === 'provisioning' && provider === 'static') return observed;
  return null;
}

/**
 * Whether a failed active that answered healthy (`observed: 'ready'`) at `nowMs`, healthy at every poll
 * since `healthySinceMs`, has been so for the policy's `failedActiveRecoveryMs` and goes back to `ready`.
 * Pure.
 */
export function recoversFailedActive(
  observed: 'ready' | 'degraded',
  healthySinceMs: number,
  nowMs: number,
  recoveryMs: number,
): boolean {
  return observed === 'ready' && nowMs - healthySinceMs >= recoveryMs;
}
