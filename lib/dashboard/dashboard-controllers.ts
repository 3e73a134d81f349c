import {
  Body,
  Controller,
  Get,
  HttpCode,
  HttpException,
  HttpStatus,
  Inject,
  Param,
  Post,
  Query,
  type Type,
  UseFilters,
  UseGuards,
} from '@nestjs/common';
import { MAX_PURGE_LIMIT } from '../admin/purge-options.js';
import type { JobsWorker } from '../fleet/jobs-worker.js';
import { jobErrorMessage } from '../http/job-error-message.js';
import { jobErrorStatus } from '../http/job-error-status.js';
import { JobsExceptionFilter } from '../http/jobs-exception.filter.js';
import { requireJob } from '../http/require-job.js';
import { JobsService } from '../jobs.service.js';
import { JobStateConflictError } from '../model/errors/job-state-conflict.error.js';
import type { JobsError } from '../model/errors/jobs.error.js';
import type { JobRecord, JobStatus } from '../model/job-record.js';
import type { JobMetrics } from '../query/job-metrics.js';
import { type BulkRetryResult, bulkRetry } from './bulk-retry.js';
import { createDashboardPageController } from './dashboard-page.controller.js';
import {
  jsonObject,
  listOptionsFromQuery,
  metricsOptionsFromQuery,
  purgeOptionsFromBody,
  type QueryString,
} from './dashboard-query.js';
import { type DashboardJobRecord, dashboardRecord } from './dashboard-record.js';
import { DashboardRequestGuard } from './dashboard-request.guard.js';
import { findDashboardJob } from './find-job.js';
import type { ResolvedDashboardOptions } from './jobs-dashboard.options.js';
import { DashboardRouteMetadata } from './route-metadata.js';

/** What a retry, cancel or promote must leave the job in to answer 200 (whether this call or an earlier one did it). */
const TARGET_STATUS = { retry: 'pending', cancel: 'cancelled', promote: 'pending' } as const satisfies Record<
  string,
  JobStatus
>;

/**
 * The dashboard's controllers for one `forRoot`: a class per call, so its path, guard and payload rule are its own.
 * Reads, and (unless `readOnly`) the state-changing calls behind the extra `DashboardRequestGuard` (header, JSON body,
 * same origin); `routeMetadata` on every class and handler.
 */
export function createDashboardControllers(options: ResolvedDashboardOptions): Type<unknown>[] {
  const guards = options.guard ? [options.guard] : [];
  const view = (job: JobRecord): DashboardJobRecord => dashboardRecord(job, options);

  @Controller(`${options.path}/api`)
  @UseGuards(...guards)
  @UseFilters(JobsExceptionFilter)
  @DashboardRouteMetadata(options.routeMetadata)
  class JobsDashboardReadController {
    constructor(@Inject(JobsService) private readonly jobs: JobsService) {}

    @Get('jobs')
    async list(@Query() query: QueryString): Promise<{ jobs: DashboardJobRecord[]; nextCursor: string | null }> {
      const page = await this.jobs.list(listOptionsFromQuery(query));
      return { jobs: page.jobs.map(view), nextCursor: page.nextCursor };
    }

    @Get('jobs/:id')
    async find(@Param('id') id: string): Promise<DashboardJobRecord> {
      return view(await findDashboardJob(this.jobs, id));
    }

    @Get('metrics')
    metrics(@Query() query: QueryString): Promise<JobMetrics> {
      return this.jobs.metrics(metricsOptionsFromQuery(query));
    }

    @Get('workers')
    async workers(): Promise<{ workers: JobsWorker[] }> {
      return { workers: await this.jobs.workers() };
    }
  }

  @Controller(`${options.path}/api`)
  @UseGuards(...guards, new DashboardRequestGuard(options.allowedOrigins))
  @UseFilters(JobsExceptionFilter)
  @DashboardRouteMetadata(options.routeMetadata)
  class JobsDashboardActionsController {
    constructor(@Inject(JobsService) private readonly jobs: JobsService) {}

    @Post('jobs/retry')
    @HttpCode(HttpStatus.OK)
    retryAll(@Body() body: unknown): Promise<BulkRetryResult> {
      return bulkRetry(this.jobs, jsonObject(body));
    }

    @Post('jobs/:id/retry')
    @HttpCode(HttpStatus.OK)
    retry(@Param('id') id: string): Promise<DashboardJobRecord> {
      return this.change(id, 'retry');
    }

    @Post('jobs/:id/cancel')
    @HttpCode(HttpStatus.OK)
    cancel(@Param('id') id: string): Promise<DashboardJobRecord> {
      return this.change(id, 'cancel');
    }

    @Post('jobs/:id/promote')
    @HttpCode(HttpStatus.OK)
    promote(@Param('id') id: string): Promise<DashboardJobRecord> {
      return this.change(id, 'promote');
    }

    @Post('purge')
    @HttpCode(HttpStatus.OK)
    async purge(@Body() body: unknown): Promise<{ deleted: number; more: boolean }> {
      // Bounded like bulk retry: one request never runs for minutes; `more` says to call again. The body's own
      // `limit` (checked by `purge`: null, 0 or 1,001 are refused, not replaced) can only ask for fewer.
      const options = purgeOptionsFromBody(body);
      const limit = options.limit === undefined ? MAX_PURGE_LIMIT : options.limit;
      const deleted = await this.jobs.purge({ ...options, limit });
      return { deleted, more: deleted === limit };
    }

    /** Pauses a name fleet-wide (`JobsService.pause`); body `{ "name": "…" }`. */
    @Post('pause')
    @HttpCode(HttpStatus.OK)
    async pause(@Body() body: unknown): Promise<{ name: string; paused: true }> {
      const { name } = jsonObject(body);
      await this.jobs.pause(name as string);
      return { name: name as string, paused: true };
    }

    /** Resumes a paused name (`JobsService.resume`); body `{ "name": "…" }`; `wasPaused` as `resume` answers. */
    @Post('resume')
    @HttpCode(HttpStatus.OK)
    async resume(@Body() body: unknown): Promise<{ name: string; paused: false; wasPaused: boolean }> {
      const { name } = jsonObject(body);
      const wasPaused = await this.jobs.resume(name as string);
      return { name: name as string, paused: false, wasPaused };
    }

    /** 200 with the row when the job is in the action's target status afterwards; 409 with the row otherwise. */
    private async change(id: string, action: keyof typeof TARGET_STATUS): Promise<DashboardJobRecord> {
      let job: JobRecord;
      try {
        job = await requireJob(id, this.jobs[action](id));
      } catch (error) {
        if (jobErrorStatus(error) !== HttpStatus.CONFLICT) throw error;
        throw conflict(error as JobsError, await this.jobs.findById(id));
      }
      if (job.status !== TARGET_STATUS[action]) throw conflict(new JobStateConflictError(action, id, job.status), job);
      return view(job);
    }
  }

  /** 409 in `JobsExceptionFilter`'s shape, plus the job as it is now so the page can show why. */
  const conflict = (error: JobsError, job: JobRecord | null): HttpException =>
    new HttpException(
      { statusCode: HttpStatus.CONFLICT, error: error.name, message: jobErrorMessage(error), job: job && view(job) },
      HttpStatus.CONFLICT,
      { cause: error },
    );

  const page = createDashboardPageController(options);
  return options.readOnly
    ? [JobsDashboardReadController, page]
    : [JobsDashboardReadController, JobsDashboardActionsController, page];
}
