import { agoOf, agoText, durationText } from './ages';

describe('agoText', () => {
  it('reads whole seconds under a minute, then the two largest units, and never for no sighting', () => {
    expect(agoText(0)).toBe('0 s ago');
    expect(agoText(3_400)).toBe('3 s ago');
    expect(agoText(12_999)).toBe('12 s ago');
    expect(agoText(59_999)).toBe('59 s ago');
    expect(agoText(60_000)).toBe('1 min 00 s ago');
    expect(agoText(245_000)).toBe('4 min 05 s ago');
    expect(agoText(3 * 3_600_000 + 7 * 60_000 + 59_000)).toBe('3 h 07 min ago');
    expect(agoText(2 * 86_400_000 + 4 * 3_600_000)).toBe('2 d 4 h ago');
    expect(agoText(null)).toBe('never');
  });

  it('reads a time from a clock ahead of ours as just now', () => {
    expect(agoText(-1_500)).toBe('0 s ago');
    expect(agoOf('2030-01-01T00:00:01.000Z', new Date('2030-01-01T00:00:00.000Z'))).toBe('0 s ago');
  });

  it('ages an ISO time at now', () => {
    expect(agoOf('2030-01-01T00:00:00.000Z', new Date('2030-01-01T00:00:12.300Z'))).toBe('12 s ago');
  });
});

describe('durationText', () => {
  it('reads milliseconds under a second, tenths under a minute, then the two largest units', () => {
    expect(durationText(850)).toBe('850 ms');
    expect(durationText(999.6)).toBe('1000 ms');
    expect(durationText(1_000)).toBe('1.0 s');
    expect(durationText(12_345)).toBe('12.3 s');
    expect(durationText(125_000)).toBe('2 min 05 s');
    expect(durationText(-5)).toBe('0 ms');
  });
});
