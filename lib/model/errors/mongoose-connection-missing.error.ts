import { JobsError } from './jobs.error.js';

/** No `@nestjs/mongoose` connection of the name `JobsModule` was given (or the default one) in the application. */
export class MongooseConnectionMissingError extends JobsError {
  constructor(readonly connectionName: string | undefined) {
    const where =
      connectionName === undefined
        ? 'the default mongoose connection: import MongooseModule.forRoot(uri)'
        : `the mongoose connection "${connectionName}": import MongooseModule.forRoot(uri, { connectionName: '${connectionName}' })`;
    super(
      `JobsModule needs ${where} in the same application, or pass JobsModule.forRoot({ connectionName }) the name ` +
        'of a connection you already create.',
    );
  }
}
