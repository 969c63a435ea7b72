import type { z } from 'zod';
import { promotionFixture, stepFailedEvent } from '../test/support/fake-haru-api';
import type { ApiClient } from './api-client';
import { demotionOutcomes, stateCell } from './demotion-outcome';

const OP1 = '00000000-0000-4000-8000-000000000101';
const OP2 = '00000000-0000-4000-8000-000000000102';
const FLEET = `/v1/fleets/prod`;

/** An API answering `answers` by path, recording what was asked. */
function fakeApi(answers: Record<string, unknown>): ApiClient & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    baseUrl: 'http://haru.test',
    get: <T>(path: string, schema: z.ZodType<T>) => {
      asked.push(path);
      if (!(path in answers)) throw new Error(`unexpected GET ${path}`);
      return Promise.resolve(schema.parse(answers[path]));
    },
    post: () => Promise.reject(new Error('no posts')),
    stream: () => Promise.reject(new Error('no streams')),
  };
}

const eventsPath = `${FLEET}/events?order=desc&limit=1000`;

describe('demotionOutcomes', () => {
  it("reads a promotion whose demotion step failed as not demoted, from the step's failure event", async () => {
    const failed = promotionFixture(OP1, '2030-01-01T00:00:00.000Z');
    const fine = promotionFixture(OP2, '2030-01-01T00:01:00.000Z');
    const event = stepFailedEvent(7, OP1, 'demoteOldActive', 'old active unreachable, left as it was (drain: refused)');
    const api = fakeApi({ [eventsPath]: { events: [event], nextCursor: 7 } });
    const outcomes = await demotionOutcomes(api, FLEET, [fine, failed]);
    expect(outcomes.get(OP1)).toEqual({
      status: 'failed',
      error: 'demoteOldActive: SupervisorUnreachable: old active unreachable, left as it was (drain: refused)',
    });
    expect(outcomes.get(OP2)).toEqual({ status: 'demoted' });
    expect(stateCell(failed, outcomes.get(OP1))).toBe('succeeded (not demoted)');
    expect(stateCell(fine, outcomes.get(OP2))).toBe('succeeded');
  });

  it('asks nothing when no succeeded promotion ran its demotion step', async () => {
    const api = fakeApi({});
    const skipped = promotionFixture(OP1, '2030-01-01T00:00:00.000Z', { step: 'commitRouting' });
    const failed = promotionFixture(OP2, '2030-01-01T00:00:00.000Z', { state: 'failed', step: 'wakeModels' });
    expect((await demotionOutcomes(api, FLEET, [skipped, failed])).size).toBe(0);
    expect(api.asked).toEqual([]);
  });

  it('asks the operation itself when the events read do not reach back to it, and says unknown without progress', async () => {
    const old = promotionFixture(OP1, '2029-12-01T00:00:00.000Z');
    const older = promotionFixture(OP2, '2029-11-01T00:00:00.000Z');
    const filler = Array.from({ length: 1000 }, (_, i) => ({
      ...stepFailedEvent(5000 - i, OP2, 'wakeModels', 'x'),
      type: 'domain.state',
      createdAt: '2030-01-01T00:00:00.000Z',
    }));
    const progress = (status: string) => ({
      operationId: OP1,
      kind: 'promote',
      phase: 'succeeded',
      abortRequested: false,
      steps: [
        { step: 'demoteOldActive', status, startedAt: null, finishedAt: null, attempts: 1, lastError: 'E: gone' },
      ],
    });
    const api = fakeApi({
      [eventsPath]: { events: filler, nextCursor: 5000 },
      [`${FLEET}/operations/${OP1}`]: { ...old, progress: progress('failed') },
      [`${FLEET}/operations/${OP2}`]: { ...older, progress: null },
    });
    const outcomes = await demotionOutcomes(api, FLEET, [old, older]);
    expect(outcomes.get(OP1)).toEqual({ status: 'failed', error: 'demoteOldActive: E: gone' });
    expect(outcomes.get(OP2)).toEqual({ status: 'unknown' });
    expect(stateCell(older, outcomes.get(OP2))).toBe('succeeded (demotion unknown)');
  });
});
