import { log } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { type FingerprintCheck, judgeFingerprint, type WokenMeasurement } from '../core/wake-fingerprint';
import type { FingerprintMode } from '../schemas/enums';
import { FailureType } from '../schemas/failures';
import { FINGERPRINT_PROMPT, type WakeFingerprints } from '../schemas/fingerprint';
import type { SupervisorStatus } from '../schemas/supervisor';
import type { ActivityDeps } from './deps';
import { cancellation, heartbeatWhile, type DomainTarget } from './support';

/** How sleepModels takes fingerprints (from the policy's `probe.fingerprint`); absent: none taken. */
export interface FingerprintTaking {
  maxTokens: number;
  timeoutMs: number;
}

/** How probeModels checks them (the policy's `probe.fingerprint`). */
export interface FingerprintChecking {
  mode: FingerprintMode;
  toleranceNats: number;
  maxTokens: number;
}

/** A woken model's fingerprint verdict as the probe step reports it. */
export type ReportedCheck = Omit<FingerprintCheck, 'model' | 'isFailure'>;

const requestOptions = (timeoutMs: number) => ({ signal: cancellation(), timeoutMs: timeoutMs + 5_000 });

/**
 * Before a demotion sleeps them: each awake model of the domain answers the fixed prompt greedily and the
 * answer with its token logprobs is stored on its slot (`slots.wake_fingerprints`). A model already asleep (an
 * earlier attempt slept it) keeps what that attempt stored; a model that cannot answer loses its fingerprint, so
 * its next promotion falls back to the non-blank check rather than judging it against a stale answer. Never
 * throws for a model's failure: the demotion goes on.
 */
export async function storeFingerprints(
  deps: ActivityDeps,
  target: DomainTarget,
  status: SupervisorStatus,
  taking: FingerprintTaking,
): Promise<void> {
  const host = target.domain;
  const awake = new Set(status.models.filter((m) => m.state === 'awake').map((m) => m.name));
  const names = target.inference.flatMap((s) => s.models.map((m) => m.name)).filter((n) => awake.has(n));
  if (names.length === 0) return;
  const response = await heartbeatWhile(
    `fingerprint of ${names.join(', ')}`,
    deps.supervisor.fingerprint(
      host,
      { prompt: FINGERPRINT_PROMPT, maxTokens: taking.maxTokens, timeoutMs: taking.timeoutMs, models: names },
      requestOptions(taking.timeoutMs),
    ),
  );
  const takenAt = deps.now().toISOString();
  for (const slot of target.inference) {
    const next: WakeFingerprints = { ...slot.wakeFingerprints };
    for (const { name } of slot.models.filter((m) => awake.has(m.name))) {
      const r = response.results.find((x) => x.model === name);
      if (r?.ok && r.text !== null) {
        next[name] = {
          prompt: FINGERPRINT_PROMPT,
          text: r.text,
          tokens: r.tokens,
          tokenLogprobs: r.tokenLogprobs,
          takenAt,
          serverPid: r.serverPid,
        };
      } else {
        delete next[name];
        log.warn('fingerprint not taken', { domainId: target.domain.id, model: name, error: r?.error ?? 'no answer' });
      }
    }
    await deps.store.slots.setWakeFingerprints(slot.id, next);
  }
}

/**
 * After the wake: every model with a stored fingerprint scores its stored answer again and answers the prompt
 * once more; the pure rule (core/wake-fingerprint.ts) judges each. Throws non-retryable ProbeFailed, with both
 * scores, for every model the rule fails under `enforce`; otherwise returns each model's verdict (a model with
 * no fingerprint says so).
 */
export async function checkFingerprints(
  deps: ActivityDeps,
  target: DomainTarget,
  checking: FingerprintChecking,
  timeoutMs: number,
): Promise<Record<string, ReportedCheck>> {
  const host = target.domain;
  const stored = Object.fromEntries(target.inference.flatMap((s) => Object.entries(s.wakeFingerprints ?? {})));
  const names = target.inference.flatMap((s) => s.models.map((m) => m.name));
  const withPrint = names.filter((n) => stored[n]);
  const woken = new Map<string, WokenMeasurement>();
  if (withPrint.length > 0) {
    const prompt = stored[withPrint[0]!]!.prompt;
    const [scores, answers] = await heartbeatWhile(
      `fingerprint check of ${withPrint.join(', ')}`,
      Promise.all([
        deps.supervisor.scoreFingerprint(
          host,
          {
            prompt,
            timeoutMs,
            answers: withPrint.map((model) => ({
              model,
              text: stored[model]!.text,
              tokenCount: stored[model]!.tokenLogprobs.length,
            })),
          },
          requestOptions(timeoutMs),
        ),
        deps.supervisor.fingerprint(
          host,
          { prompt, maxTokens: checking.maxTokens, timeoutMs, models: withPrint },
          requestOptions(timeoutMs),
        ),
      ]),
    );
    for (const model of withPrint) {
      const score = scores.results.find((r) => r.model === model);
      const answer = answers.results.find((r) => r.model === model);
      woken.set(model, {
        tokenLogprobs: score?.ok ? score.tokenLogprobs : null,
        text: answer?.ok ? answer.text : null,
        serverPid: answer?.serverPid ?? null,
        error: score?.ok ? null : (score?.error ?? 'not scored'),
      });
    }
  }
  const checks = names.map((model) =>
    judgeFingerprint({
      model,
      stored: stored[model] ?? null,
      woken: woken.get(model) ?? null,
      toleranceNats: checking.toleranceNats,
      mode: checking.mode,
    }),
  );
  const failed = checks.filter((c) => c.isFailure);
  if (failed.length > 0) {
    throw ApplicationFailure.nonRetryable(
      `wake fidelity check failed: ${failed.map((c) => c.note).join('; ')}`,
      FailureType.ProbeFailed,
      { models: failed.map(({ model, storedScore, wokenScore }) => ({ model, storedScore, wokenScore })) },
    );
  }
  for (const c of checks.filter((x) => x.verdict === 'score-outside' || x.verdict === 'text-differs')) {
    log.warn('wake fidelity differs', { domainId: target.domain.id, model: c.model, verdict: c.verdict, note: c.note });
  }
  return Object.fromEntries(checks.map(({ model, isFailure: _f, ...rest }) => [model, rest]));
}
