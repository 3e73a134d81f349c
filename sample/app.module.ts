import { type DynamicModule, Module } from '@nestjs/common';
import { MongooseModule } from '@nestjs/mongoose';
import { ScheduleModule } from '@nestjs/schedule';
import { JobsModule } from '../lib';
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
      ],
      controllers: [JobsController, HealthController],
      providers: [SampleHandlers],
    };
  }
}
