/** Metadata key under which `@JobHandler` stores its name and options. */
export const JOB_HANDLER_METADATA = 'jobs:handler';
