// The seeded generator of the fault checker (mulberry32: 32-bit state, fast, good enough to draw workloads), shared by
// the runner (through prng.ts) and the driver process, so one seed names one plan everywhere.
'use strict';

/** A generator of floats in [0, 1) for `seed` (any integer), with helpers to draw from it. */
function createPrng(seed) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    /** An integer in [min, max]. */
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    /** True with probability `p`. */
    chance: (p) => next() < p,
    /** One element of `items`. */
    pick: (items) => items[Math.floor(next() * items.length)],
    /** A key of `weights` drawn in proportion to its weight. */
    weighted: (weights) => {
      const entries = Object.entries(weights);
      let draw = next() * entries.reduce((sum, [, weight]) => sum + weight, 0);
      for (const [key, weight] of entries) {
        draw -= weight;
        if (draw < 0) return key;
      }
      return entries[entries.length - 1][0];
    },
  };
}

module.exports = { createPrng };
