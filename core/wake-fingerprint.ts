import type { FingerprintMode } from '../schemas/enums';
import type { ModelFingerprint } from '../schemas/fingerprint';

/**
 * How a woken model compares with its fingerprint:
 * - `none`: no stored fingerprint (first promotion, or none could be taken), or one taken from a server process
 *   that has since restarted: the non-blank check alone applies;
 * - `matched`: same score within the tolerance and the same greedy text;
 * - `text-differs`: same score, other greedy text (batch shape and kernels change greedy picks: reported only);
 * - `score-outside`: the stored answer scores outside the tolerance: the model woke with other weights;
 * - `unmeasured`: the woken model could not score the answer (an error or a short answer).
 */
export const FINGERPRINT_VERDICTS = ['none', 'matched', 'text-differs', 'score-outside', 'unmeasured'] as const;
export type FingerprintVerdict = (typeof FINGERPRINT_VERDICTS)[number];

export interface FingerprintCheck {
  model: string;
  verdict: FingerprintVerdict;
  /** Mean token logprob of the stored answer before the sleep and after the wake, in nats; null when unknown. */
  storedScore: number | null;
  wokenScore: number | null;
  /** True when the promotion must fail: `score-outside` or `unmeasured` under `enforce`. */
  isFailure: boolean;
  /** One line for the step result or the error, with both figures. */
  note: string;
}

export interface WokenMeasurement {
  /** Logprobs of the stored answer's tokens under the woken model; null with `error`. */
  tokenLogprobs: number[] | null;
  /** The woken model's greedy answer to the same prompt; null when not measured. */
  text: string | null;
  /** The process serving the model's port now; null when not known. */
  serverPid?: number | null;
  error?: string | null;
}

/** Mean of the logprobs, in nats per token; null for none. */
export const meanLogprob = (logprobs: readonly number[]): number | null =>
  logprobs.length === 0 ? null : logprobs.reduce((a, b) => a + b, 0) / logprobs.length;

const fmt = (n: number | null) => (n === null ? 'unknown' : n.toFixed(3));

/**
 * Judges one woken model against its stored fingerprint. Pure: the caller measured the model. The score is the
 * mean token logprob of the stored answer; it fails when it moved by more than `toleranceNats` (either way: a
 * model that suddenly finds its own answer far likelier has changed too). Only scores decide; a text mismatch
 * with a matching score is reported.
 */
export function judgeFingerprint(input: {
  model: string;
  stored: ModelFingerprint | null;
  woken: WokenMeasurement | null;
  toleranceNats: number;
  mode: FingerprintMode;
}): FingerprintCheck {
  const { model, stored, woken, toleranceNats, mode } = input;
  const storedScore = stored ? meanLogprob(stored.tokenLogprobs) : null;
  if (!stored || storedScore === null) {
    return {
      model,
      verdict: 'none',
      storedScore: null,
      wokenScore: null,
      isFailure: false,
      note: `${model}: no stored fingerprint, non-blank check only`,
    };
  }
  const [pidThen, pidNow] = [stored.serverPid ?? null, woken?.serverPid ?? null];
  if (pidThen !== null && pidNow !== null && pidThen !== pidNow) {
    // A restarted server may serve other weights on purpose (an upgrade): the old answer proves nothing.
    return {
      model,
      verdict: 'none',
      storedScore,
      wokenScore: null,
      isFailure: false,
      note: `${model}: its vLLM server restarted since the fingerprint (pid ${pidThen}, now ${pidNow}), non-blank check only`,
    };
  }
  const enforced = mode === 'enforce';
  const logprobs = woken?.tokenLogprobs ?? null;
  if (!logprobs || logprobs.length !== stored.tokenLogprobs.length) {
    const why =
      woken?.error ??
      (logprobs ? `scored ${logprobs.length} tokens of ${stored.tokenLogprobs.length}` : 'not measured');
    return {
      model,
      verdict: 'unmeasured',
      storedScore,
      wokenScore: null,
      isFailure: enforced,
      note: `${model}: stored answer could not be scored after the wake (${why}); stored score ${fmt(storedScore)}`,
    };
  }
  const wokenScore = meanLogprob(logprobs)!;
  const drift = Math.abs(wokenScore - storedScore);
  const figures = `stored ${fmt(storedScore)}, woken ${fmt(wokenScore)} nats/token (tolerance ${toleranceNats})`;
  if (drift > toleranceNats) {
    return {
      model,
      verdict: 'score-outside',
      storedScore,
      wokenScore,
      isFailure: enforced,
      note: `${model}: stored answer scores outside the tolerance after the wake: ${figures}`,
    };
  }
  if (woken?.text !== null && woken?.text !== undefined && woken.text !== stored.text) {
    return {
      model,
      verdict: 'text-differs',
      storedScore,
      wokenScore,
      isFailure: false,
      note: `${model}: score matches (${figures}), greedy text differs`,
    };
  }
  return {
    model,
    verdict: 'matched',
    storedScore,
    wokenScore,
    isFailure: false,
    note: `${model}: matches (${figures})`,
  };
}
