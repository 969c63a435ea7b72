import type { ModelFingerprint } from '../schemas/fingerprint';
import { judgeFingerprint, meanLogprob } from './wake-fingerprint';

const stored = (over: Partial<ModelFingerprint> = {}): ModelFingerprint => ({
  prompt: 'p',
  text: ' ran away',
  tokens: [' ran', ' away'],
  tokenLogprobs: [-0.2, -0.4],
  takenAt: '2026-01-01T00:00:00.000Z',
  ...over,
});
const judge = (over: Partial<Parameters<typeof judgeFingerprint>[0]> = {}) =>
  judgeFingerprint({
    model: 'llama',
    stored: stored(),
    woken: { tokenLogprobs: [-0.21, -0.41], text: ' ran away' },
    toleranceNats: 0.5,
    mode: 'enforce',
    ...over,
  });

describe('judgeFingerprint', () => {
  it('matches when the score is within the tolerance and the text is the same', () => {
    expect(judge()).toMatchObject({ verdict: 'matched', isFailure: false });
    expect(judge().storedScore).toBeCloseTo(-0.3);
    expect(judge().wokenScore).toBeCloseTo(-0.31);
  });

  it('fails under enforce when the stored answer scores outside the tolerance, naming both figures', () => {
    const check = judge({ woken: { tokenLogprobs: [-6, -8], text: ' zz qq' } });
    expect(check).toMatchObject({ verdict: 'score-outside', isFailure: true });
    expect(check.note).toContain('stored -0.300');
    expect(check.note).toContain('woken -7.000');
  });

  it('fails on a score that rose beyond the tolerance too', () => {
    expect(judge({ woken: { tokenLogprobs: [0, 0], text: ' ran away' }, toleranceNats: 0.1 }).verdict).toBe(
      'score-outside',
    );
  });

  it('only reports a score outside the tolerance under warn', () => {
    expect(judge({ mode: 'warn', woken: { tokenLogprobs: [-6, -8], text: 'x' } })).toMatchObject({
      verdict: 'score-outside',
      isFailure: false,
    });
  });

  it('reports, never fails, a different greedy text whose score matches', () => {
    const check = judge({ woken: { tokenLogprobs: [-0.2, -0.4], text: ' ran off' } });
    expect(check).toMatchObject({ verdict: 'text-differs', isFailure: false });
    expect(check.note).toMatch(/greedy text differs/);
  });

  it('falls back to the non-blank check without a stored fingerprint, and says so', () => {
    const check = judge({ stored: null });
    expect(check).toMatchObject({ verdict: 'none', isFailure: false, storedScore: null });
    expect(check.note).toMatch(/no stored fingerprint/);
  });

  it('falls back to the non-blank check when the server restarted since the fingerprint, and says so', () => {
    const check = judge({
      stored: stored({ serverPid: 10 }),
      woken: { tokenLogprobs: [-6, -8], text: 'x', serverPid: 11 },
    });
    expect(check).toMatchObject({ verdict: 'none', isFailure: false });
    expect(check.note).toMatch(/restarted since the fingerprint \(pid 10, now 11\)/);
    expect(
      judge({ stored: stored({ serverPid: 10 }), woken: { tokenLogprobs: [-6, -8], text: 'x', serverPid: 10 } })
        .verdict,
    ).toBe('score-outside');
  });

  it('fails under enforce when the woken model cannot score the answer', () => {
    expect(judge({ woken: { tokenLogprobs: null, text: null, error: 'HTTP 500' } })).toMatchObject({
      verdict: 'unmeasured',
      isFailure: true,
    });
    expect(judge({ woken: { tokenLogprobs: [-0.2], text: null } }).note).toMatch(/scored 1 tokens of 2/);
    expect(judge({ mode: 'warn', woken: null }).isFailure).toBe(false);
  });

  it('treats a text-only measurement missing (null) as no text mismatch', () => {
    expect(judge({ woken: { tokenLogprobs: [-0.2, -0.4], text: null } }).verdict).toBe('matched');
  });

  it('averages logprobs per token', () => {
    expect(meanLogprob([])).toBeNull();
    expect(meanLogprob([-1, -3])).toBe(-2);
  });
});
