/**
 * Span, attribute and metric names, inlined from the OpenTelemetry messaging semantic conventions (so that
 * `@opentelemetry/semantic-conventions` is not a runtime dependency), and this library's own under `nestjs_mongo_jobs.`.
 */
export const MESSAGING_SYSTEM_VALUE = 'nestjs_mongo_jobs';
export const INSTRUMENTATION_SCOPE = 'nestjs-mongo-jobs';

export const ATTR_MESSAGING_SYSTEM = 'messaging.system';
export const ATTR_MESSAGING_DESTINATION_NAME = 'messaging.destination.name';
export const ATTR_MESSAGING_OPERATION_TYPE = 'messaging.operation.type';
export const ATTR_MESSAGING_OPERATION_NAME = 'messaging.operation.name';
export const ATTR_MESSAGING_MESSAGE_ID = 'messaging.message.id';
export const ATTR_MESSAGING_BATCH_MESSAGE_COUNT = 'messaging.batch.message_count';
export const ATTR_MESSAGING_CLIENT_ID = 'messaging.client.id';
export const ATTR_ERROR_TYPE = 'error.type';
export const ATTR_JOB_ATTEMPT = 'nestjs_mongo_jobs.job.attempt';
export const ATTR_OUTCOME = 'nestjs_mongo_jobs.outcome';
export const ATTR_ABORT_REASON = 'nestjs_mongo_jobs.abort.reason';
export const ATTR_EXCEPTION_MESSAGE = 'exception.message';
/** On a send span: how many of its jobs were not stored (dedupe key held, cron tick stored by another instance). */
export const ATTR_DEDUPLICATED = 'nestjs_mongo_jobs.deduplicated';

export const OPERATION_SEND = 'send';
export const OPERATION_PROCESS = 'process';

export const EVENT_ABORTED = 'nestjs_mongo_jobs.aborted';
export const EVENT_RELEASED = 'nestjs_mongo_jobs.released';

export const METRIC_SENT_MESSAGES = 'messaging.client.sent.messages';
export const METRIC_CONSUMED_MESSAGES = 'messaging.client.consumed.messages';
export const METRIC_PROCESS_DURATION = 'messaging.process.duration';
export const METRIC_ATTEMPTS = 'nestjs_mongo_jobs.attempts';
export const METRIC_QUEUE_WAIT = 'nestjs_mongo_jobs.queue.wait';
export const METRIC_LEASE_RENEWALS = 'nestjs_mongo_jobs.lease.renewals';
export const METRIC_LEASE_LOSSES = 'nestjs_mongo_jobs.lease.losses';
export const METRIC_PENDING = 'nestjs_mongo_jobs.jobs.pending';
export const METRIC_RUNNING = 'nestjs_mongo_jobs.jobs.running';

/** The conventions' recommended boundaries for messaging durations, in seconds. */
export const DURATION_BUCKETS_S = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];
