import { SetMetadata } from '@nestjs/common';
import * as nestMetadataKeys from '@nestjs/common/constants.js';
import { InvalidOptionError } from '../model/errors/invalid-option.error.js';

/**
 * Keys Nest itself reads from controllers and handlers (`path`, `method`, `__guards__`, `host`, …): set by an app,
 * they would move routes or drop the dashboard's own guards, so `routeMetadata` may not use them.
 */
const NEST_METADATA_KEYS: ReadonlySet<string> = new Set(
  (Object.values(nestMetadataKeys) as unknown[]).filter((value): value is string => typeof value === 'string'),
);

/** Checks `routeMetadata`: a plain object with non-empty string keys that are not Nest's own; returns a frozen copy. */
export function resolveRouteMetadata(metadata: unknown = {}): Readonly<Record<string, unknown>> {
  const prototype = metadata !== null && typeof metadata === 'object' ? Object.getPrototypeOf(metadata) : undefined;
  if (prototype !== Object.prototype && prototype !== null) {
    throw new InvalidOptionError('routeMetadata', metadata, 'must be a plain object of metadata keys and values');
  }
  const record = metadata as Record<string, unknown>;
  if (Object.getOwnPropertySymbols(record).length > 0) {
    throw new InvalidOptionError('routeMetadata', metadata, 'must have string keys only (no symbols)');
  }
  for (const key of Object.keys(record)) {
    if (key === '') throw new InvalidOptionError('routeMetadata', metadata, 'must not have an empty key');
    if (NEST_METADATA_KEYS.has(key) || key.startsWith('design:')) {
      throw new InvalidOptionError(`routeMetadata.${key}`, record[key], "is one of Nest's own metadata keys");
    }
  }
  return Object.freeze({ ...record });
}

/**
 * Sets every entry on the controller class and on each of its route handlers, as `@SetMetadata(key, value)` on the
 * class and on every handler would: guards read either (`reflector.get(key, context.getHandler())`,
 * `getAllAndOverride(key, [handler, class])`). A class decorator, so routes added to a controller later are covered.
 */
export function DashboardRouteMetadata(metadata: Readonly<Record<string, unknown>>): ClassDecorator {
  return (controller) => {
    const handlers = Object.entries(Object.getOwnPropertyDescriptors(controller.prototype)).filter(([, descriptor]) =>
      isRouteHandler(descriptor.value),
    );
    for (const [key, value] of Object.entries(metadata)) {
      SetMetadata(key, value)(controller);
      for (const [name, descriptor] of handlers) SetMetadata(key, value)(controller.prototype, name, descriptor);
    }
  };
}

/** A method Nest maps to a route: `@Get()`, `@Post()`, … set its path metadata on the function. */
function isRouteHandler(method: unknown): boolean {
  return typeof method === 'function' && Reflect.hasOwnMetadata(nestMetadataKeys.PATH_METADATA, method);
}
