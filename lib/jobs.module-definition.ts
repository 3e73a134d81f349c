import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { JobsModuleExtras, JobsModuleOptions } from './jobs.options.js';

export const {
  ConfigurableModuleClass: ConfigurableJobsModule,
  MODULE_OPTIONS_TOKEN: JOBS_MODULE_OPTIONS,
  OPTIONS_TYPE: JOBS_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: JOBS_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<JobsModuleOptions>({ moduleName: 'Jobs' })
  .setClassMethodName('forRoot')
  .setFactoryMethodName('createJobsOptions')
  // connectionName picks an injection token, so it must be known before any factory runs.
  .setExtras<JobsModuleExtras>({ connectionName: undefined }, (definition) => definition)
  .build();

/** Implement this to pass a class to `JobsModule.forRootAsync({ useClass })`. */
export interface JobsOptionsFactory {
  createJobsOptions(): JobsModuleOptions | Promise<JobsModuleOptions>;
}
