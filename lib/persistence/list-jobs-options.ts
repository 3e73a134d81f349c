import { InvalidOptionError } from '../model/errors/invalid-option.error.js';
import { parseJobId } from '../model/job-id.js';
import { JOB_STATUSES, type JobRecord, type JobStatus } from '../model/job-record.js';
import { MAX_JOB_NAME_LENGTH } from '../model/jobs.constants.js';
import { nonEmptyString } from '../model/validate.js';
import { decodeListCursor } from './list-cursor.js';

/** What `JobsService.list` returns: one page, newest first, and the cursor of the next (null on the last page). */
export interface JobListPage<TPayload = unknown> {
  jobs: JobRecord<TPayload>[];
  nextCursor: string | null;
}

/** Filters and paging of `JobsService.list`; every filter given must hold. */
export interface ListJobsOptions {
  /** One status, or any of several. @default every status */
  status?: JobStatus | JobStatus[];
  /** Jobs of exactly this name. */
  name?: string;
  /** A job id (24 hex characters) or a dedupe key, matched exactly (never as a pattern). */
  search?: string;
  /** Created at or after this instant. */
  from?: Date;
  /** Created strictly before this instant. */
  to?: Date;
  /** Page size, an integer from 1 to 200. @default 50 */
  limit?: number;
  /** The `nextCursor` of the previous page. */
  cursor?: string;
}

export const DEFAULT_LIST_LIMIT = 50;
export const MAX_LIST_LIMIT = 200;
/** Longest search string: an id is 24 characters; dedupe keys are short by nature. */
const MAX_SEARCH_LENGTH = 1_000;
const LIST_OPTION_KEYS: readonly string[] = ['status', 'name', 'search', 'from', 'to', 'limit', 'cursor'];

/** The validated query the repository runs: only plain strings, Dates, ObjectIds and a decoded cursor id. */
export interface JobListQuery {
  statuses?: JobStatus[];
  name?: string;
  /** A search: candidate `_id`s (the string itself, and its ObjectId when it is 24-hex) or the dedupe key. */
  search?: { ids: unknown[]; key: string };
  from?: Date;
  to?: Date;
  limit: number;
  /** The `_id` of the last row of the previous page. */
  after?: unknown;
}

/** Checks `list`'s options before any query; a misspelt key is refused rather than ignored (it would widen the list). */
export function resolveListQuery(options: ListJobsOptions = {}): JobListQuery {
  if (options === null || typeof options !== 'object') {
    throw new InvalidOptionError('options', options, 'must be an object');
  }
  const unknown = Object.keys(options).find((key) => !LIST_OPTION_KEYS.includes(key));
  if (unknown !== undefined) {
    const given = (options as unknown as Record<string, unknown>)[unknown];
    throw new InvalidOptionError(unknown, given, `is not a list option (${LIST_OPTION_KEYS.join(', ')})`);
  }
  const { status, name, search, from, to, limit = DEFAULT_LIST_LIMIT, cursor } = options;
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) {
    throw new InvalidOptionError('limit', limit, `must be an integer from 1 to ${MAX_LIST_LIMIT}`);
  }
  const query: JobListQuery = { limit };
  if (status !== undefined) query.statuses = statuses(status);
  if (name !== undefined) query.name = nonEmptyString('name', name, MAX_JOB_NAME_LENGTH);
  if (search !== undefined) {
    const text = nonEmptyString('search', search, MAX_SEARCH_LENGTH);
    const id = parseJobId(text);
    query.search = { ids: id ? [text, id] : [text], key: text };
  }
  if (from !== undefined) query.from = validDate('from', from);
  if (to !== undefined) query.to = validDate('to', to);
  if (query.from && query.to && query.from > query.to) {
    throw new InvalidOptionError('from', from, `must not be after to (${query.to.toISOString()})`);
  }
  if (cursor !== undefined) query.after = decodeListCursor(cursor);
  return query;
}

function statuses(status: unknown): JobStatus[] {
  const list = Array.isArray(status) ? status : [status];
  const rule = `must be one of ${JOB_STATUSES.join(', ')}, or a non-empty array of them`;
  if (list.length === 0 || !list.every((s) => JOB_STATUSES.includes(s as JobStatus))) {
    throw new InvalidOptionError('status', status, rule);
  }
  return [...new Set(list as JobStatus[])];
}

function validDate(option: string, value: unknown): Date {
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) {
    throw new InvalidOptionError(option, value, 'must be a valid Date');
  }
  return value;
}
