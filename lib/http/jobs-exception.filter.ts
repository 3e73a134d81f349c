import { type ArgumentsHost, Catch, HttpException } from '@nestjs/common';
import { BaseExceptionFilter } from '@nestjs/core';
import { JobsError } from '../model/errors/jobs.error.js';
import { jobErrorMessage } from './job-error-message.js';
import { jobErrorStatus } from './job-error-status.js';

/**
 * Answers the library's typed errors with an HTTP status instead of a 500: malformed or unknown id → 404, invalid
 * input → 400, wrong state or contention → 409 (the table is `jobErrorStatus`). The body is
 * `{ statusCode, error: <error class name>, message }`, the message free of internal details (`jobErrorMessage`).
 * Library errors that are not about the request (bootstrap, handler-side) get Nest's default answer, and the filter
 * never sees other errors, so your own filters keep them. HTTP only: in other contexts (GraphQL, RPC, WebSocket) it
 * leaves the error alone.
 * Built on Nest's `BaseExceptionFilter`, so it answers through whichever HTTP adapter the app uses (Express, Fastify).
 *
 * @example
 * ```ts
 * // main.ts: every controller
 * app.useGlobalFilters(new JobsExceptionFilter(app.getHttpAdapter()));
 * // or as a provider: { provide: APP_FILTER, useClass: JobsExceptionFilter }
 * // or one controller or route: @UseFilters(JobsExceptionFilter)
 * ```
 */
@Catch(JobsError)
export class JobsExceptionFilter extends BaseExceptionFilter {
  override catch(exception: unknown, host: ArgumentsHost): void {
    // A global filter also sees GraphQL, RPC and WebSocket handlers, which have no HTTP response to answer on:
    // returning nothing leaves the error to that context's own handling, as if this filter were not there.
    if (host.getType() !== 'http') return;
    const status = jobErrorStatus(exception);
    const error = exception as JobsError;
    super.catch(
      status === undefined
        ? exception
        : new HttpException({ statusCode: status, error: error.name, message: jobErrorMessage(error) }, status, {
            cause: error,
          }),
      host,
    );
  }
}
