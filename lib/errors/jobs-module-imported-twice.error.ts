import { JobsError } from './jobs.error.js';

/** `JobsModule.forRoot()` reached one application twice: two workers and an ambiguous `JobsService`. */
export class JobsModuleImportedTwiceError extends JobsError {
  constructor(readonly count: number) {
    super(
      `JobsModule is imported ${count} times in this application, which would start ${count} workers and make ` +
        'JobsService ambiguous. Import JobsModule.forRoot() once, in the root module; it is global, so feature ' +
        'modules inject JobsService without importing it.',
    );
  }
}
