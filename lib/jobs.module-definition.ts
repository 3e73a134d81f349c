import {
  type ConfigurableModuleAsyncOptions,
  ConfigurableModuleBuilder,
  type ConfigurableModuleCls,
} from '@nestjs/common';
import type { JobsModuleExtras, JobsModuleOptions } from './model/jobs.options.js';

const definition = new ConfigurableModuleBuilder<JobsModuleOptions>({ moduleName: 'Jobs' })
  .setClassMethodName('forRoot')
  .setFactoryMethodName('createJobsOptions')
  // connectionName picks an injection token, so it must be known before any factory runs.
  .setExtras<JobsModuleExtras>({ connectionName: undefined }, (definition) => definition)
  .build();

// The exports are annotated, not inferred: an inferred type from NestJS 12 (ES modules only) is written into the
// CommonJS declarations as `import("@nestjs/common", { with: { "resolution-mode": "import" } })`, which TypeScript
// before 5.3 cannot read; an annotation is written as a plain import.
export const ConfigurableJobsModule: ConfigurableModuleCls<
  JobsModuleOptions,
  'forRoot',
  'createJobsOptions',
  JobsModuleExtras
> = definition.ConfigurableModuleClass;
export const JOBS_MODULE_OPTIONS: string | symbol = definition.MODULE_OPTIONS_TOKEN;
/** Carries a type only (undefined at runtime, as Nest's `OPTIONS_TYPE`): `typeof` it is what `forRoot` takes. */
export const JOBS_OPTIONS_TYPE: JobsModuleOptions & Partial<JobsModuleExtras> = definition.OPTIONS_TYPE;
/** Carries a type only: `typeof` it is what `forRootAsync` takes. */
export const JOBS_ASYNC_OPTIONS_TYPE: ConfigurableModuleAsyncOptions<JobsModuleOptions, 'createJobsOptions'> &
  Partial<JobsModuleExtras> = definition.ASYNC_OPTIONS_TYPE;

/** Implement this to pass a class to `JobsModule.forRootAsync({ useClass })`. */
export interface JobsOptionsFactory {
  createJobsOptions(): JobsModuleOptions | Promise<JobsModuleOptions>;
}
