import { KNOWN_ERROR_TYPES } from './known-error-types.js';

/** The one label value of every job name (or error type) metrics do not report on its own. */
export const OTHER_LABEL = '_other';

/**
 * Label values of the metrics, bounded: a job name is reported as itself when this process has a handler for it or
 * lists it in `telemetry.extraJobNames`, an error type when it is a known class; anything else is `_other`. Job names
 * made at run time (`tenant.${id}.sync`) would otherwise make one series each, past any SDK's cardinality limit.
 */
export class MetricLabels {
  private readonly extraJobNames: ReadonlySet<string>;

  constructor(
    /** Whether this process has a handler for the name; asked at every call, since handlers register at bootstrap. */
    private readonly handles: (name: string) => boolean,
    extraJobNames: readonly string[],
  ) {
    this.extraJobNames = new Set(extraJobNames);
  }

  jobName(name: string): string {
    return this.extraJobNames.has(name) || this.handles(name) ? name : OTHER_LABEL;
  }

  errorType(errorClass: string): string {
    return KNOWN_ERROR_TYPES.has(errorClass) ? errorClass : OTHER_LABEL;
  }
}
