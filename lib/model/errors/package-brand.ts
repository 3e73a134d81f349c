/**
 * A symbol both builds of this package share (`Symbol.for` answers the same symbol in every copy), where their
 * classes differ: a process that loads the CommonJS build (dist/) and the ES module build (dist/esm/) has two of each
 * class, so `instanceof` and `===` on a class cannot recognise the other copy's objects. Used for the few checks that
 * must hold across both copies; see the README's Install section for what does not.
 */
export function packageBrand(name: string): symbol {
  return Symbol.for(`nestjs-mongo-jobs:${name}`);
}

/** Marks `target` with `brand` (not enumerable, not writable). */
export function setBrand(target: object, brand: symbol): void {
  Object.defineProperty(target, brand, { value: true });
}

/** Whether `value` (or its prototype chain) carries `brand`. */
export function hasBrand(value: unknown, brand: symbol): boolean {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    (value as Record<symbol, unknown>)[brand] === true
  );
}
