import { createRequire } from 'node:module';
import { resolve } from 'node:path';

/** A seeded generator of floats in [0, 1) with helpers to draw from it (see prng.cjs). */
export interface Prng {
  next(): number;
  /** An integer in [min, max]. */
  int(min: number, max: number): number;
  /** True with probability `p`. */
  chance(p: number): boolean;
  /** One element of `items`. */
  pick<T>(items: readonly T[]): T;
  /** A key of `weights` drawn in proportion to its weight. */
  weighted<K extends string>(weights: Record<K, number>): K;
}

// The driver process (plain CommonJS) uses the same generator: one implementation, loaded from the repository root
// so that it works from jest (ESM) and from the compiled runner alike.
const load = createRequire(resolve('package.json'));
const { createPrng: create } = load('./test/torture/prng.cjs') as { createPrng: (seed: number) => Prng };

/** The generator for `seed`. */
export function createPrng(seed: number): Prng {
  return create(seed);
}
