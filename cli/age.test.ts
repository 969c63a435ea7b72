import { ageOf, humanAge } from './age';

const S = 1_000;
const M = 60 * S;
const H = 60 * M;
const D = 24 * H;

describe('humanAge', () => {
  it.each([
    [0, '0s'],
    [999, '0s'],
    [5 * S, '5s'],
    [119 * S, '119s'],
    [2 * M, '2m'],
    [4 * M + 30 * S, '4m30s'],
    [10 * M + 59 * S, '10m'],
    [179 * M, '179m'],
    [3 * H, '3h'],
    [5 * H + 20 * M, '5h20m'],
    [8 * H + 59 * M, '8h'],
    [47 * H, '47h'],
    [2 * D, '2d'],
    [3 * D + 4 * H, '3d4h'],
    [8 * D + 23 * H, '8d'],
    [400 * D, '400d'],
    [3 * 365 * D + 10 * D, '3y10d'],
    [9 * 365 * D, '9y'],
  ])('reads %d ms as %s, as kubectl prints an AGE', (ms, age) => {
    expect(humanAge(ms)).toBe(age);
  });

  it('reads a time ahead of this clock (skew) as 0s, not a negative age', () => {
    expect(humanAge(-5 * S)).toBe('0s');
  });
});

describe('ageOf', () => {
  const now = new Date('2030-01-01T01:00:00.000Z');
  it('is the age at now of an ISO time, `-` for none and `?` for a time it cannot read', () => {
    expect(ageOf('2030-01-01T00:57:00.000Z', now)).toBe('3m');
    expect(ageOf(null, now)).toBe('-');
    expect(ageOf('yesterday', now)).toBe('?');
  });
});
