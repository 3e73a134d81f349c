/**
 * The application of docs/testing.md ("Testing your jobs", "reports.ts" there), as it is written there but for the
 * imports and the database URI; `test/e2e/testing-kit-readme.spec.ts` runs its tests and checks the page.
 */
import { Controller, HttpCode, Injectable, Module, Param, Post } from '@nestjs/common';
import { MongooseModule } from '@nestjs/mongoose';
import { type JobExecutionContext, JobHandler, JobsModule, JobsService } from '../../lib';
import { testMongoUri, uniqueDatabaseName } from './test-database';

const dbName = uniqueDatabaseName('testing-kit-readme');

@Injectable()
export class ReportStore {
  private readonly built = new Map<string, { chunks: number }>();
  save(reportId: string, chunks: number) {
    this.built.set(reportId, { chunks });
  }
  get(reportId: string) {
    return this.built.get(reportId);
  }
}

@Injectable()
export class ReportJobs {
  constructor(private readonly store: ReportStore) {}

  @JobHandler('report.build', { maxAttempts: 3 })
  async build(payload: { reportId: string; chunks: number }, ctx: JobExecutionContext) {
    for (let done = 1; done <= payload.chunks; done += 1) {
      ctx.signal.throwIfAborted(); // cancelled, timed out, lease lost or shutting down: stop here
      await ctx.updateProgress({ done, total: payload.chunks });
    }
    this.store.save(payload.reportId, payload.chunks);
  }
}

@Controller('reports')
export class ReportsController {
  constructor(private readonly jobs: JobsService) {}

  @Post(':id')
  @HttpCode(202)
  async request(@Param('id') id: string) {
    const job = await this.jobs.enqueue('report.build', { reportId: id, chunks: 3 });
    return { jobId: job.id };
  }
}

@Module({
  imports: [MongooseModule.forRoot(testMongoUri(), { dbName }), JobsModule.forRoot()],
  controllers: [ReportsController],
  providers: [ReportStore, ReportJobs],
})
export class AppModule {}
