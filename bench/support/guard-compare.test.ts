import {
  type Baseline,
  baselineFrom,
  baselineSchema,
  bestRunIndex,
  compareAll,
  compareFigure,
  exitCode,
  type FigureSpec,
} from './guard-compare';

const spec = (overrides: Partial<FigureSpec> = {}): FigureSpec => ({
  figure: 'detection',
  unit: 'ms',
  band: 0.25,
  isGated: true,
  ...overrides,
});

const baseline = (figures: Record<string, number>): Baseline => ({
  note: 'test',
  figures: Object.entries(figures).map(([figure, value]) => ({
    figure,
    value,
    unit: 'ms',
    date: '2026-12-03',
    commit: 'abc1234',
    command: 'npm run bench:guard',
    machine: '2 vCPU',
  })),
});

describe('compareFigure', () => {
  it('gives the ratio of the measured value to the baseline', () => {
    expect(compareFigure(spec(), 150, 200).ratio).toBe(0.75);
    expect(compareFigure(spec(), 300, 200).ratio).toBe(1.5);
  });

  it('does not mark a figure worse while it stays within its band above the baseline', () => {
    expect(compareFigure(spec({ band: 0.25 }), 124, 100).isWorse).toBe(false);
    expect(compareFigure(spec({ band: 0.25 }), 125, 100).isWorse).toBe(false);
  });

  it('marks a figure worse once it rises past its band', () => {
    expect(compareFigure(spec({ band: 0.25 }), 126, 100).isWorse).toBe(true);
    expect(compareFigure(spec({ band: 0.5 }), 126, 100).isWorse).toBe(false);
  });

  it('never marks an improvement worse', () => {
    expect(compareFigure(spec({ band: 0 }), 50, 100).isWorse).toBe(false);
  });

  it('never marks a yardstick worse, however far it moved', () => {
    const c = compareFigure(spec({ isGated: false }), 1_000, 100);
    expect(c.ratio).toBe(10);
    expect(c.isWorse).toBe(false);
  });

  it('has no ratio and no verdict for a figure the baseline lacks', () => {
    expect(compareFigure(spec(), 100, null)).toMatchObject({ baseline: null, ratio: null, isWorse: false });
  });
});

describe('compareAll', () => {
  const specs = [spec({ figure: 'a' }), spec({ figure: 'b', band: 1 })];

  it('compares each figure with the baseline entry of the same name', () => {
    const rows = compareAll(specs, { a: 200, b: 150 }, baseline({ b: 100, a: 100 }));
    expect(rows.map((r) => [r.figure, r.baseline, r.ratio, r.isWorse])).toEqual([
      ['a', 100, 2, true],
      ['b', 100, 1.5, false],
    ]);
  });

  it('throws when a figure was not measured', () => {
    expect(() => compareAll(specs, { a: 1 }, baseline({ a: 1, b: 1 }))).toThrow('figure b was not measured');
    expect(() => compareAll(specs, { a: 1, b: Number.NaN }, baseline({}))).toThrow('figure b was not measured');
  });
});

describe('exitCode', () => {
  const worse = compareFigure(spec(), 200, 100);
  const fine = compareFigure(spec(), 100, 100);

  it('is 0 without --strict even when a figure is worse', () => {
    expect(exitCode([fine, worse], false)).toBe(0);
  });

  it('is 1 under --strict when a figure is worse', () => {
    expect(exitCode([fine, worse], true)).toBe(1);
  });

  it('is 0 under --strict when no figure is worse', () => {
    expect(exitCode([fine, compareFigure(spec({ isGated: false }), 900, 100)], true)).toBe(0);
  });
});

describe('bestRunIndex', () => {
  const specs = [spec({ figure: 'ms' }), spec({ figure: 'cpu' }), spec({ figure: 'yardstick', isGated: false })];

  it('picks the run that is lowest across the gated figures relative to their medians', () => {
    const runs = [
      { ms: 3_000, cpu: 0.5, yardstick: 1 },
      { ms: 2_900, cpu: 0.4, yardstick: 9 }, // best on both gated figures; the yardstick does not count
      { ms: 3_100, cpu: 0.45, yardstick: 0.1 },
    ];
    expect(bestRunIndex(specs, runs)).toBe(1);
  });

  it('weighs a figure in thousands no more than one below 1', () => {
    // Run 0 is 1 % slower on ms (30 ms) and 40 % cheaper on cpu: it is the better run.
    const runs = [
      { ms: 3_030, cpu: 0.3, yardstick: 1 },
      { ms: 3_000, cpu: 0.5, yardstick: 1 },
    ];
    expect(bestRunIndex(specs, runs)).toBe(0);
  });

  it('throws for no runs', () => {
    expect(() => bestRunIndex(specs, [])).toThrow('no runs');
  });
});

describe('baselineFrom', () => {
  it('stamps every figure with its value, unit and where it was measured', () => {
    const b = baselineFrom(
      [spec({ figure: 'a', unit: 'ms' }), spec({ figure: 'r', unit: 'x' })],
      { a: 12, r: 1.5 },
      {
        date: '2026-12-03',
        commit: 'abc1234',
        command: 'npm run bench:guard -- --update-baseline',
        machine: '2 vCPU',
        note: 'best of 3',
      },
    );
    expect(baselineSchema.parse(b)).toEqual({
      note: 'best of 3',
      figures: [
        {
          figure: 'a',
          value: 12,
          unit: 'ms',
          date: '2026-12-03',
          commit: 'abc1234',
          command: 'npm run bench:guard -- --update-baseline',
          machine: '2 vCPU',
        },
        {
          figure: 'r',
          value: 1.5,
          unit: 'x',
          date: '2026-12-03',
          commit: 'abc1234',
          command: 'npm run bench:guard -- --update-baseline',
          machine: '2 vCPU',
        },
      ],
    });
  });

  it('is refused by the schema with a value that is not positive (no ratio could be taken)', () => {
    expect(baselineSchema.safeParse(baseline({ a: 0 })).success).toBe(false);
  });
});
