import { Inject, Injectable } from '@nestjs/common';
import { DateTime } from 'luxon';
import { Types } from 'mongoose';
import { JobHandlerRegistry } from '../discovery/job-handler.registry';
import { JobsExplorer } from '../discovery/jobs.explorer';
import { InvalidOptionError } from '../errors/invalid-option.error';
import { UnknownJobError } from '../errors/unknown-job.error';
import { JOBS_RESOLVED_OPTIONS, MAX_DURATION_MS, MAX_JOB_NAME_LENGTH } from '../jobs.constants';
import type { ResolvedJobsOptions } from '../jobs.options';
import type { EnqueueOptions } from '../jobs.types';
import { dedupeScope } from '../persistence/dedupe-scope';
import type { NewJobDocument } from '../types/new-job-document';
import { addMs, now } from '../utils/clock';
import { assertStorablePayload } from '../utils/payload-validator';
import { duration, finiteNumber, nonEmptyString, positiveInteger } from '../utils/validate';

/** Longest `group` enqueue option. */
const MAX_GROUP_LENGTH = 256;

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
      maxAttempts: positiveInteger(
        'maxAttempts',
        options.maxAttempts ?? handler?.maxAttempts ?? this.options.maxAttempts,
      ),
      attempts: [],
      fencingToken: 0,
      createdAt: at,
      updatedAt: at,
    };
    if (options.dedupeKey !== undefined) {
      doc.dedupeKey = nonEmptyString('dedupeKey', options.dedupeKey);
      doc.dedupeScope = dedupeScope(jobName, doc.dedupeKey);
    }
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
    return options.runAt;
  }
  return options.delayMs === undefined ? at : addMs(at, duration('delayMs', options.delayMs, MAX_DURATION_MS, true));
}
