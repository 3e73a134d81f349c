import { Inject, Injectable } from '@nestjs/common';
import { DateTime } from 'luxon';
import { Types } from 'mongoose';
import { JobHandlerRegistry } from '../handlers/job-handler.registry.js';
import { JobsExplorer } from '../handlers/jobs.explorer.js';
import { addMs, now } from '../model/clock.js';
import { InvalidOptionError } from '../model/errors/invalid-option.error.js';
import { UnknownJobError } from '../model/errors/unknown-job.error.js';
import {
  JOBS_RESOLVED_OPTIONS,
  MAX_DURATION_MS,
  MAX_ENQUEUE_ATTEMPTS,
  MAX_JOB_NAME_LENGTH,
} from '../model/jobs.constants.js';
import type { ResolvedJobsOptions } from '../model/jobs.options.js';
import type { EnqueueOptions } from '../model/jobs.types.js';
import type { NewJobDocument } from '../model/new-job-document.js';
import { assertStorablePayload } from '../model/payload-validator.js';
import {
  duration,
  finiteNumber,
  integerInRange,
  nonEmptyString,
  onlyKnownKeys,
  positiveInteger,
} from '../model/validate.js';
import { dedupeScope } from '../persistence/dedupe-scope.js';
import { ENQUEUE_OPTION_KEYS } from './enqueue-option-keys.js';
import { windowFields } from './window-options.js';

/** Longest `group` enqueue option. */
const MAX_GROUP_LENGTH = 256;

/**
 * The years a `runAt` may fall in: a four-digit year, as ISO 8601 writes it (JSON, the dashboard, logs); anything
 * else is a unit or parsing mistake (seconds for ms, a two-digit year), never a date a job is meant to run at.
 */
const RUN_AT_YEARS = { first: 2000, last: 9999 } as const;

/** Validates an enqueue request and builds the document to insert; throws before anything is written. */
@Injectable()
export class JobDocumentFactory {
  constructor(
    private readonly registry: JobHandlerRegistry,
    private readonly explorer: JobsExplorer,
    @Inject(JOBS_RESOLVED_OPTIONS) private readonly options: ResolvedJobsOptions,
  ) {}

  build(name: unknown, payload: unknown, options: EnqueueOptions): NewJobDocument {
    const jobName = nonEmptyString('name', name, MAX_JOB_NAME_LENGTH);
    if (options === null || typeof options !== 'object') {
      throw new InvalidOptionError('options', options, 'must be an object');
    }
    onlyKnownKeys(options, ENQUEUE_OPTION_KEYS, 'an enqueue option');
    this.explorer.exploreOnce(); // an enqueue from another module's onModuleInit may precede ours
    const handler = this.registry.get(jobName);
    if ((options.strict ?? true) && !handler && this.registry.size > 0) {
      throw new UnknownJobError(jobName, this.registry.names());
    }
    assertStorablePayload(payload);
    const at = now();
    const doc: NewJobDocument = {
      _id: new Types.ObjectId(),
      name: jobName,
      payload: payload ?? null,
      status: 'pending',
      runAt: resolveRunAt(options, at),
      priority: options.priority === undefined ? 0 : finiteNumber('priority', options.priority),
      attemptCount: 0,
      // The handler's and module's maxAttempts were checked when they were resolved.
      maxAttempts:
        options.maxAttempts == null
          ? positiveInteger('maxAttempts', handler?.maxAttempts ?? this.options.maxAttempts)
          : integerInRange('maxAttempts', options.maxAttempts, 1, MAX_ENQUEUE_ATTEMPTS),
      attempts: [],
      fencingToken: 0,
      createdAt: at,
      updatedAt: at,
    };
    if (options.dedupeKey !== undefined) {
      doc.dedupeKey = nonEmptyString('dedupeKey', options.dedupeKey);
      doc.dedupeScope = dedupeScope(jobName, doc.dedupeKey);
    }
    Object.assign(doc, windowFields(jobName, options, doc.runAt, at));
    if (options.group !== undefined) doc.group = nonEmptyString('group', options.group, MAX_GROUP_LENGTH);
    return doc;
  }

  /**
   * The job of one cron tick: due at the tick, with the tick in its payload and `cron:<name>:<tick ISO>` as its
   * `scheduleKey`, a unique key that is never released, so at most one job exists per tick.
   */
  buildTick(name: string, tick: Date): NewJobDocument & { scheduleKey: string } {
    const scheduledFor = DateTime.fromJSDate(tick, { zone: 'utc' }).toISO() ?? tick.toISOString();
    return { ...this.build(name, { scheduledFor }, { runAt: tick }), scheduleKey: `cron:${name}:${scheduledFor}` };
  }
}

function resolveRunAt(options: EnqueueOptions, at: Date): Date {
  if (options.runAt !== undefined && options.delayMs !== undefined) {
    throw new InvalidOptionError('runAt', options.runAt, 'cannot be combined with delayMs');
  }
  if (options.runAt !== undefined) {
    if (!(options.runAt instanceof Date) || Number.isNaN(options.runAt.getTime())) {
      throw new InvalidOptionError('runAt', options.runAt, 'must be a valid Date');
    }
    const year = options.runAt.getUTCFullYear();
    if (year < RUN_AT_YEARS.first || year > RUN_AT_YEARS.last) {
      throw new InvalidOptionError(
        'runAt',
        options.runAt,
        `must be a Date in the years ${RUN_AT_YEARS.first} to ${RUN_AT_YEARS.last} (UTC)`,
      );
    }
    return options.runAt;
  }
  return options.delayMs === undefined ? at : addMs(at, duration('delayMs', options.delayMs, MAX_DURATION_MS, true));
}
