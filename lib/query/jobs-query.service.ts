import { Injectable } from '@nestjs/common';
import { PausedNames } from '../claim/paused-names.js';
import { now } from '../model/clock.js';
import { JOB_STATUSES, type JobRecord, type JobStatus } from '../model/job-record.js';
import { requireJobId } from '../model/require-job-id.js';
import { toJobRecord } from '../persistence/job.schema.js';
import { JobReadStore } from '../persistence/job-read.store.js';
import { encodeListCursor } from '../persistence/list-cursor.js';
import { type JobListPage, type ListJobsOptions, resolveListQuery } from '../persistence/list-jobs-options.js';
import { collectJobMetrics, type JobMetrics } from './job-metrics.js';
import { type JobMetricsOptions, resolveMetricsOptions } from './job-metrics-options.js';

/**
 * Reads of stored jobs: one by id, counts per status, pages of a list, dashboard figures (`JobsService.findById`,
 * `stats`, `list` and `metrics`, where their contracts are documented).
 */
@Injectable()
export class JobsQuery {
  constructor(
    private readonly reads: JobReadStore,
    private readonly paused: PausedNames,
  ) {}

  /** @throws InvalidJobIdError */
  async findById<TPayload = unknown>(id: string): Promise<JobRecord<TPayload> | null> {
    const doc = await this.reads.findById(requireJobId(id));
    return doc && toJobRecord<TPayload>(doc);
  }

  async stats(): Promise<Record<JobStatus, number>> {
    const counts = await this.reads.countByStatus();
    return Object.fromEntries(JOB_STATUSES.map((status) => [status, counts.get(status) ?? 0])) as Record<
      JobStatus,
      number
    >;
  }

  /** @throws InvalidOptionError, InvalidCursorError */
  async list<TPayload = unknown>(options: ListJobsOptions): Promise<JobListPage<TPayload>> {
    const query = resolveListQuery(options);
    // One row more than the page says whether another page follows, so the last page's cursor is null.
    const docs = await this.reads.listJobs(query, query.limit + 1);
    const page = docs.slice(0, query.limit);
    return {
      jobs: page.map((doc) => toJobRecord<TPayload>(doc)),
      nextCursor: docs.length > query.limit ? encodeListCursor(page[page.length - 1]._id) : null,
    };
  }

  /** @throws InvalidOptionError */
  async metrics(options: JobMetricsOptions): Promise<JobMetrics> {
    // The paused names as of now; as last read here if that read fails (the counts matter more than the flag).
    const readPaused = () =>
      this.paused.read().then(
        (paused) => paused.map(({ name }) => name),
        () => this.paused.names(),
      );
    return collectJobMetrics(this.reads, resolveMetricsOptions(options), now(), readPaused);
  }
}
