import type * as OpenTelemetryApiModule from '@opentelemetry/api';
import { importOptional } from './import-optional.js';

/** The `@opentelemetry/api` module (an optional peer dependency). */
export type OpenTelemetryApi = typeof OpenTelemetryApiModule;

let loading: Promise<OpenTelemetryApi | null> | undefined;

/**
 * `@opentelemetry/api`, imported once per process on first call (module bootstrap), or null when it is not
 * installed. A dynamic import, so that an app without the package neither loads nor needs it.
 */
export function loadOpenTelemetryApi(): Promise<OpenTelemetryApi | null> {
  loading ??= importOptional(() => import('@opentelemetry/api'));
  return loading;
}
