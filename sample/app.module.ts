import { type DynamicModule, Module } from '@nestjs/common';
import { MongooseModule } from '@nestjs/mongoose';
import { JobsModule } from '../lib';
import { JobsController } from './jobs.controller';
import { SampleHandlers } from './sample.handlers';

@Module({})
export class AppModule {
  static forUri(uri: string): DynamicModule {
    return {
      module: AppModule,
      imports: [
        MongooseModule.forRoot(uri, { dbName: 'nestjs_mongo_jobs_sample' }),
        JobsModule.forRoot({ concurrency: 4 }),
      ],
      controllers: [JobsController],
      providers: [SampleHandlers],
    };
  }
}
