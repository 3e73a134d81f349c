import { fmt, median } from './helpers';

/** Median and range of one figure over repeated measurements. */
export interface Spread {
  median: number;
  min: number;
  max: number;
  n: number;
  /** First and third quartiles (interquartile range), when computed from the values. */
  q1?: number;
  q3?: number;
}

export function spreadOf(values: Array<number | null | undefined>): Spread {
  const finite = values.filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
  const sorted = [...finite].sort((a, b) => a - b);
  return {
    median: median(finite),
    min: finite.length > 0 ? sorted[0] : Number.NaN,
    max: finite.length > 0 ? sorted[sorted.length - 1] : Number.NaN,
    n: finite.length,
    q1: quantile(sorted, 0.25),
    q3: quantile(sorted, 0.75),
  };
}

/** The `p` quantile of sorted values, interpolated between neighbours (NaN for none). */
function quantile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const at = (sorted.length - 1) * p;
  const low = Math.floor(at);
  const high = Math.ceil(at);
  return sorted[low] + (sorted[high] - sorted[low]) * (at - low);
}

/** ` [IQR q1–q3]` from 4 values on (fewer have no meaningful quartiles), else nothing. */
function fmtIqr(s: Spread, digits: number, suffix = ''): string {
  if (s.n < 4 || s.q1 === undefined || s.q3 === undefined) return '';
  return ` [IQR ${fmt(s.q1, digits)}${suffix}–${fmt(s.q3, digits)}${suffix}]`;
}

/** `median (min–max)`, or `–` when nothing was measured. */
export function fmtSpread(s: Spread, digits: number, suffix = ''): string {
  if (s.n === 0) return '–';
  if (s.n === 1) return `${fmt(s.median, digits)}${suffix}`;
  return `${fmt(s.median, digits)}${suffix}${fmtIqr(s, digits, suffix)} (${fmt(s.min, digits)}–${fmt(s.max, digits)})`;
}

/**
 * A ratio between two systems measured in the same rounds: the ratio of their medians over the rounds both ran, and
 * the range of the per-round ratios (round i of one against round i of the other), the spread a target is judged
 * against.
 */
export interface RatioSpread {
  ofMedians: number;
  rounds: Spread;
}

export function ratioSpread(
  numerator: Map<number, number | null>,
  denominator: Map<number, number | null>,
): RatioSpread {
  // Only rounds where both were measured: a system run in fewer rounds (Agenda) is compared with those rounds.
  const paired: Array<[number, number]> = [];
  for (const [round, value] of numerator) {
    const base = denominator.get(round);
    if (typeof value === 'number' && typeof base === 'number' && base > 0) paired.push([value, base]);
  }
  const ofMedians = spreadOf(paired.map(([v]) => v)).median / spreadOf(paired.map(([, b]) => b)).median;
  return { ofMedians, rounds: spreadOf(paired.map(([v, b]) => v / b)) };
}

export function fmtRatio(r: RatioSpread, digits = 2): string {
  if (!Number.isFinite(r.ofMedians)) return '–';
  const range =
    r.rounds.n > 1 ? ` (${fmt(r.rounds.min, digits)}–${fmt(r.rounds.max, digits)})` : ` (${r.rounds.n} round)`;
  return `${fmt(r.ofMedians, digits)}×${fmtIqr(r.rounds, digits, '×')}${range}`;
}

export type Verdict = 'met' | 'not met' | 'inside the spread' | 'not measured';

/** A bound on a figure: `≤ 1.15` (lower is better) or `≥ 0.9` (higher is better). */
export interface Bound {
  op: '≤' | '≥';
  value: number;
}

const holds = (bound: Bound, v: number) => (bound.op === '≤' ? v <= bound.value : v >= bound.value);

/**
 * Judges a target against a median and the range of the repeated measurements behind it. Met only when the
 * median and every measurement are on the right side; not met when all are on the wrong side; a bound between the
 * smallest and the largest measurement is inside the spread, however good the median looks.
 */
export function judge(bound: Bound, medianValue: number, range: Spread): Verdict {
  if (!Number.isFinite(medianValue) || range.n === 0) return 'not measured';
  if (range.min <= bound.value && bound.value <= range.max) return 'inside the spread';
  const all = [medianValue, range.min, range.max];
  if (all.every((v) => holds(bound, v))) return 'met';
  if (all.every((v) => !holds(bound, v))) return 'not met';
  // The median and the rounds disagree (possible for a ratio of medians): no claim either way.
  return 'inside the spread';
}

/** One row of the targets table. */
export interface TargetCheck {
  target: string;
  measured: string;
  verdict: Verdict;
}
