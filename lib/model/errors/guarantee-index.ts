/** A unique sparse single-field index that an exactly-once promise depends on. */
export interface GuaranteeIndex {
  name: string;
  field: string;
  /** What breaks without it, for error messages. */
  guards: string;
}

/** An index on `guarantee.name` or on its key that does not enforce it, and why. */
export interface IndexProblem {
  /** The offending index, or null when the guarantee index is simply missing. */
  conflictingIndex: string | null;
  problem: string;
}
