import { z } from 'zod';
import { median } from './stats';

/**
 * What `bench:guard` does with its figures, as pure functions: compare each with its committed baseline,
 * decide the exit code, and pick the best of several runs for a new baseline. Every figure is a cost
 * (lower is better).
 */

/** One figure as recorded in bench/baseline.json: the value and where it came from. */
export const baselineFigureSchema = z.object({
  figure: z.string().min(1),
  value: z.number().positive(),
  unit: z.string().min(1),
  /** ISO date of the run. */
  date: z.string().min(1),
  commit: z.string().min(1),
  command: z.string().min(1),
  machine: z.string().min(1),
});
export type BaselineFigure = z.infer<typeof baselineFigureSchema>;

export const baselineSchema = z.object({
  /** How the figures were taken (runs, load on the machine) and when they should be taken again. */
  note: z.string(),
  figures: z.array(baselineFigureSchema),
});
export type Baseline = z.infer<typeof baselineSchema>;

/** A figure the guard measures, and how far above its baseline it may land before it counts as worse. */
export interface FigureSpec {
  figure: string;
  unit: string;
  /** Allowed rise over the baseline as a fraction: 0.25 lets a figure reach 1.25x its baseline. */
  band: number;
  /** False for a yardstick measured beside Haru (it is printed with its ratio, never marked worse). */
  isGated: boolean;
}

/** One line of the guard's verdict. */
export interface Comparison {
  figure: string;
  unit: string;
  value: number;
  /** null when the baseline has no such figure (a figure added since it was recorded). */
  baseline: number | null;
  /** value / baseline; null without a baseline. */
  ratio: number | null;
  band: number;
  isGated: boolean;
  /** The ratio is above 1 + band on a gated figure. */
  isWorse: boolean;
}

/** Compares one measured value with its baseline value (null: none recorded). */
export function compareFigure(spec: FigureSpec, value: number, baseline: number | null): Comparison {
  const ratio = baseline === null ? null : value / baseline;
  return {
    figure: spec.figure,
    unit: spec.unit,
    value,
    baseline,
    ratio,
    band: spec.band,
    isGated: spec.isGated,
    isWorse: spec.isGated && ratio !== null && ratio > 1 + spec.band,
  };
}

/**
 * Compares every figure of `specs` with the baseline's. Throws when a spec's figure was not measured:
 * that is a bug of the benchmark, not a slower Haru.
 */
export function compareAll(
  specs: readonly FigureSpec[],
  measured: Readonly<Record<string, number>>,
  baseline: Baseline,
): Comparison[] {
  const recorded = new Map(baseline.figures.map((f) => [f.figure, f.value]));
  return specs.map((spec) => {
    const value = measured[spec.figure];
    if (value === undefined || !Number.isFinite(value)) throw new Error(`figure ${spec.figure} was not measured`);
    return compareFigure(spec, value, recorded.get(spec.figure) ?? null);
  });
}

/** The process's exit code: 1 only under `--strict` when a figure is worse than its band allows. */
export function exitCode(comparisons: readonly Comparison[], isStrict: boolean): 0 | 1 {
  return isStrict && comparisons.some((c) => c.isWorse) ? 1 : 0;
}

/**
 * The index of the best of several runs: the one whose gated figures have the lowest geometric mean
 * relative to each figure's median over the runs (so a figure in seconds and one in ms weigh alike).
 * Throws for no runs.
 */
export function bestRunIndex(specs: readonly FigureSpec[], runs: readonly Readonly<Record<string, number>>[]): number {
  if (runs.length === 0) throw new Error('no runs to choose from');
  const gated = specs.filter((s) => s.isGated).map((s) => s.figure);
  const medians = new Map(gated.map((f) => [f, median(runs.map((r) => r[f]!))!]));
  const score = (run: Readonly<Record<string, number>>) =>
    gated.reduce((sum, f) => sum + Math.log(run[f]! / medians.get(f)!), 0);
  let best = 0;
  runs.forEach((run, i) => {
    if (score(run) < score(runs[best]!)) best = i;
  });
  return best;
}

/** A new baseline from one run's figures, each stamped with where it came from. */
export function baselineFrom(
  specs: readonly FigureSpec[],
  measured: Readonly<Record<string, number>>,
  stamp: Omit<BaselineFigure, 'figure' | 'value' | 'unit'> & { note: string },
): Baseline {
  const { note, ...where } = stamp;
  return {
    note,
    figures: specs.map((s) => ({ figure: s.figure, value: measured[s.figure]!, unit: s.unit, ...where })),
  };
}
