import { JobsError } from './jobs.error.js';

/** `JobsModule.forRoot()` reached one application twice: two workers and an ambiguous `JobsService`. */
export class JobsModuleImportedTwiceError extends JobsError {
  constructor(
    readonly count: number,
    /** Whether the imports came from both builds of the package (its CommonJS and its ES module copy). */
    readonly bothBuilds = false,
  ) {
    super(
      `JobsModule is imported ${count} times in this application` +
        (bothBuilds
          ? ', from both the CommonJS and the ES module build of nestjs-mongo-jobs (an ES module app and a CommonJS ' +
            'dependency of it each import the package; see "Install" in its README)'
          : '') +
        `, which would start ${count} workers and make JobsService ambiguous. Import JobsModule.forRoot() once, in ` +
        'the root module; it is global, so feature modules inject JobsService without importing it.',
    );
  }
}
