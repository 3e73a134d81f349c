/** At most `max` executions of a name started in any window of `perMs` ms, across all processes. */
export interface RateLimit {
  max: number;
  perMs: number;
}

/** A name's fleet-wide limits, validated (see `resolveFleetLimits`); absent ones do not apply. */
export interface FleetLimits {
  /** Most executions of the name running at once across every process. */
  globalConcurrency?: number;
  rateLimit?: RateLimit;
  /** Most executions running at once per `group` value (jobs enqueued without a group are not limited by it). */
  groupConcurrency?: number;
}

/** Whether any fleet-wide limit applies: such names are claimed one name at a time, through their slots. */
export function hasFleetLimits(limits: FleetLimits | undefined): limits is FleetLimits {
  return (
    limits !== undefined &&
    (limits.globalConcurrency !== undefined || limits.rateLimit !== undefined || limits.groupConcurrency !== undefined)
  );
}
