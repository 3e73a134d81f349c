import type { JobsService } from '../jobs.service.js';
import { JobNotFoundError } from '../model/errors/job-not-found.error.js';
import { parseJobId } from '../model/job-id.js';
import type { JobRecord } from '../model/job-record.js';

/** Longest id worth a lookup: `list`'s search bound; anything longer is no stored id. */
const MAX_FOREIGN_ID_LENGTH = 1_000;

/**
 * The job with this id, or `JobNotFoundError` (404). A 24-hex id is looked up by `findById`; any other string may be
 * a row whose `_id` is a string (set aside as `failed` by a worker), found through `list`'s exact `search` on ids,
 * never a pattern, so the page can show every row it lists.
 */
export async function findDashboardJob(jobs: JobsService, id: string): Promise<JobRecord> {
  if (parseJobId(id) !== null) {
    const job = await jobs.findById(id);
    if (job !== null) return job;
  } else if (id.trim() !== '' && id.length <= MAX_FOREIGN_ID_LENGTH) {
    // The search also matches dedupe keys: keep only the row whose own id is this string.
    const { jobs: found } = await jobs.list({ search: id, limit: 200 });
    const job = found.find((candidate) => candidate.id === id);
    if (job !== undefined) return job;
  }
  throw new JobNotFoundError(id);
}
