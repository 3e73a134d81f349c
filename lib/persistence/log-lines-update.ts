import type { mongo } from 'mongoose';
import type { JobDocument } from '../model/job-document.js';
import { type LogBatch, MAX_LOG_LINES } from '../model/job-log.js';

/**
 * The part of an owner-fenced write that appends logged lines: pushed keeping the last MAX_LOG_LINES across all
 * attempts, and `logCount` (every line ever logged) raised, so a reader knows when lines were dropped.
 */
export function logLinesUpdate(batch: LogBatch | undefined): {
  $push?: mongo.UpdateFilter<JobDocument>['$push'];
  $inc?: mongo.UpdateFilter<JobDocument>['$inc'];
} {
  if (!batch) return {};
  return {
    $push: { logs: { $each: batch.lines, $slice: -MAX_LOG_LINES } } as mongo.UpdateFilter<JobDocument>['$push'],
    $inc: { logCount: batch.count } as mongo.UpdateFilter<JobDocument>['$inc'],
  };
}
