import { JobsError } from './jobs.error.js';

/** A `@JobHandler` on a provider that only exists inside a request; a background job never has one. */
export class RequestScopedJobHandlerError extends JobsError {
  constructor(
    readonly jobName: string,
    readonly site: string,
  ) {
    super(
      `@JobHandler('${jobName}') on ${site} cannot run: ${site.split('.')[0]} is request-scoped (itself or through ` +
        'a dependency), and a background job has no request. Put the handler on a default-scoped provider; if it ' +
        'needs a request-scoped dependency, get one per job with moduleRef.resolve(Type, ContextIdFactory.create()) ' +
        '(ModuleRef.resolve).',
    );
  }
}
