import { type DynamicModule, Module } from '@nestjs/common';
import { MongooseModule } from '@nestjs/mongoose';
import { ScheduleModule } from '@nestjs/schedule';
import { JobsModule } from '../lib';
import { JobsDashboardModule } from '../lib/dashboard';
import { JobsHealthModule } from '../lib/health';
import { HealthController } from './health.controller';
import { JobsController } from './jobs.controller';
import { SampleHandlers } from './sample.handlers';

@Module({})
export class AppModule {
  static forUri(uri: string, dbName = 'nestjs_mongo_jobs_sample'): DynamicModule {
    return {
      module: AppModule,
      imports: [
        MongooseModule.forRoot(uri, { dbName }),
        ScheduleModule.forRoot(), // needed by cron handlers
        JobsModule.forRoot({ concurrency: 4 }),
        JobsHealthModule,
        // Anonymous only because the sample listens on 127.0.0.1 for a local demo. A real app passes its own
        // `guard` (a CanActivate class); without one, or this explicit opt-out, bootstrap fails on purpose.
        JobsDashboardModule.forRoot({ path: 'dashboard', allowAnonymous: true, showPayloads: true }),
      ],
      controllers: [JobsController, HealthController],
      providers: [SampleHandlers],
    };
  }
}
