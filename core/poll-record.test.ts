import { policy } from './fleet-fixtures';
import { isBlindRound, isHeartbeatDue, lastSeenRefreshMs, needsPollWrite, type StoredPollFields } from './poll-record';

const AT = Date.parse('2026-01-01T00:00:10.000Z');
const REFRESH = 2_500;
const seen = (msBefore: number): StoredPollFields => ({
  lastSeenAt: new Date(AT - msBefore).toISOString(),
  consecutiveFailures: 0,
  lastError: null,
});

describe('lastSeenRefreshMs', () => {
  it('is half the stale limit, so a live domain stored this old is still far from stale', () => {
    expect(lastSeenRefreshMs(policy({ heartbeatIntervalMs: 500, heartbeatStaleMs: 5_000 }))).toBe(2_500);
  });

  it('is never shorter than one poll interval', () => {
    expect(lastSeenRefreshMs(policy({ heartbeatIntervalMs: 900, heartbeatStaleMs: 1_000 }))).toBe(900);
  });
});

describe('needsPollWrite', () => {
  it('skips a successful poll of a healthy domain whose stored sighting is recent', () => {
    expect(needsPollWrite(seen(REFRESH - 1), { ok: true, atMs: AT }, REFRESH)).toBe(false);
  });

  it('refreshes the stored sighting once it is the refresh interval old', () => {
    expect(needsPollWrite(seen(REFRESH), { ok: true, atMs: AT }, REFRESH)).toBe(true);
  });

  it('writes a domain never seen', () => {
    expect(needsPollWrite({ ...seen(0), lastSeenAt: null }, { ok: true, atMs: AT }, REFRESH)).toBe(true);
  });

  it('writes every failed poll, however recent the sighting (the failure count moves)', () => {
    expect(needsPollWrite(seen(10), { ok: false, atMs: AT }, REFRESH)).toBe(true);
  });

  it('writes the success that clears a failure count or an error', () => {
    expect(needsPollWrite({ ...seen(10), consecutiveFailures: 2 }, { ok: true, atMs: AT }, REFRESH)).toBe(true);
    expect(needsPollWrite({ ...seen(10), lastError: 'timed out' }, { ok: true, atMs: AT }, REFRESH)).toBe(true);
  });

  it('writes when forced (a watch first round), even with nothing new', () => {
    expect(needsPollWrite(seen(10), { ok: true, atMs: AT }, REFRESH, true)).toBe(true);
  });
});

describe('isHeartbeatDue', () => {
  it('is due for the first heartbeat of a watch', () => {
    expect(isHeartbeatDue(null, AT, 5_000)).toBe(true);
  });

  it('waits two fifths of the heartbeat timeout between heartbeats', () => {
    expect(isHeartbeatDue(AT - 1_999, AT, 5_000)).toBe(false);
    expect(isHeartbeatDue(AT - 2_000, AT, 5_000)).toBe(true);
  });

  it('heartbeats every round where no timeout is set', () => {
    expect(isHeartbeatDue(AT - 1, AT, undefined)).toBe(true);
  });
});

describe('isBlindRound', () => {
  it('is blind when two domains or more were polled and none was seen', () => {
    expect(isBlindRound(['unseen', 'unseen'])).toBe(true);
    expect(isBlindRound(['unseen', 'unseen', 'unseen'])).toBe(true);
  });

  it('sees a dying region: one domain answering (or refusing) is enough', () => {
    expect(isBlindRound(['unseen', 'seen'])).toBe(false);
    expect(isBlindRound(['seen', 'seen'])).toBe(false);
  });

  it('never calls a single domain, or no poll, blind', () => {
    expect(isBlindRound(['unseen'])).toBe(false);
    expect(isBlindRound([])).toBe(false);
  });
});
