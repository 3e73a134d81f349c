import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { errorInfo } from '../model/error-info.js';
import { IndexConflictError } from '../model/errors/index-conflict.error.js';
import { IndexSetupTimeoutError } from '../model/errors/index-setup-timeout.error.js';
import { JOBS_LOGGER_CONTEXT, JOBS_RESOLVED_OPTIONS } from '../model/jobs.constants.js';
import type { ResolvedJobsOptions } from '../model/jobs.options.js';
import { raceTimeout } from '../model/race-timeout.js';
import { classifyWriteError, isClientClosed } from './database-errors.js';
import { GUARANTEE_INDEXES, guaranteeIndexProblem, type IndexInfo, isLegacyDedupeIndex } from './guarantee-indexes.js';
import { JobIndexStore } from './job-index.store.js';
import { isLegacyClaimIndex } from './legacy-claim-index.js';

/** Waits after a transient failure of the index setup: 100 ms, doubling up to 2 s. */
const RETRY_FIRST_MS = 100;
const RETRY_MAX_MS = 2_000;

/**
 * Bootstrap step: creates the collection's indexes, refuses to start unless every index an exactly-once promise depends
 * on is in force, scopes the live dedupe keys older versions left, then drops the old global dedupe index — all within
 * `indexSetupTimeoutMs`, never hanging. A transient failure (a dropped connection, no server to select, a failover
 * code) starts the whole setup again after a short wait until that bound: every step is idempotent, and one lost
 * connection while a fleet restarts must not keep a worker from starting. Any other error fails bootstrap at once.
 */
@Injectable()
export class JobIndexes implements OnModuleInit {
  private readonly logger = new Logger(JOBS_LOGGER_CONTEXT);

  constructor(
    private readonly indexStore: JobIndexStore,
    @Inject(JOBS_RESOLVED_OPTIONS) private readonly options: ResolvedJobsOptions,
  ) {}

  async onModuleInit(): Promise<void> {
    const { collectionName, indexSetupTimeoutMs } = this.options;
    const attempts: SetUpAttempts = { over: false, lastError: undefined };
    await raceTimeout(this.setUpThroughTransientErrors(attempts), indexSetupTimeoutMs, () => {
      attempts.over = true;
      throw new IndexSetupTimeoutError(
        collectionName,
        indexSetupTimeoutMs,
        attempts.lastError === undefined ? undefined : { cause: attempts.lastError },
      );
    });
  }

  private async setUpThroughTransientErrors(attempts: SetUpAttempts): Promise<void> {
    for (let waitMs = RETRY_FIRST_MS; ; waitMs = Math.min(waitMs * 2, RETRY_MAX_MS)) {
      try {
        return await this.setUp();
      } catch (error) {
        if (attempts.over || classifyWriteError(error) !== 'transient' || isClientClosed(error)) throw error;
        attempts.lastError = error;
        this.logger.warn(
          `Setting up the indexes of collection "${this.options.collectionName}" failed (${errorInfo(error).message}); ` +
            `trying again in ${waitMs} ms`,
        );
        await new Promise((resolve) => setTimeout(resolve, waitMs));
        if (attempts.over) return;
      }
    }
  }

  private async setUp(): Promise<void> {
    const failures = await this.indexStore.createDeclaredIndexes();
    const indexes = await this.indexStore.listIndexes();
    await this.dropLegacyClaimIndex(indexes);
    for (const guarantee of GUARANTEE_INDEXES) {
      const found = guaranteeIndexProblem(guarantee, indexes);
      if (found) {
        throw new IndexConflictError(this.options.collectionName, guarantee, found, {
          cause: failures.get(guarantee.name),
        });
      }
      // An equivalent index under another name enforces it just as well.
      failures.delete(guarantee.name);
    }
    for (const [name, error] of failures) {
      // The other indexes only speed queries up: one that clashes with an existing index (a user's on the same key,
      // or the old global dedupe index until it is dropped below) must not keep the app from starting.
      if (!isIndexConflict(error)) throw error;
      this.logger.warn(
        `Index "${name}" of collection "${this.options.collectionName}" was not created, the queries it serves may ` +
          `scan more rows: ${errorInfo(error).message}`,
      );
    }
    // The old index is the only sign that older versions' rows may lack a scope, so it goes only after they got one:
    // a start that fails before the drop scopes them on the next start. While it exists it keeps live keys globally
    // unique, so live rows cannot clash with each other. Only where an older version ran: the scan reads every live job.
    const legacy = indexes.filter(isLegacyDedupeIndex);
    if (legacy.length === 0) return;
    await this.scopeLegacyKeys();
    for (const index of legacy) {
      // Its global uniqueness would reject a key that a finished job keeps, or that another job name holds.
      if (await this.indexStore.dropIndex(index.name)) {
        this.logger.log(`Dropped the old global dedupe index "${index.name}": dedupe keys are now unique per job name`);
      }
    }
  }

  /** The old claim index only costs writes now: `claim_by_name` serves every claim. */
  private async dropLegacyClaimIndex(indexes: IndexInfo[]): Promise<void> {
    for (const index of indexes.filter(isLegacyClaimIndex)) {
      if (await this.indexStore.dropIndex(index.name)) {
        this.logger.log(`Dropped the old claim index "${index.name}": claims use "claim_by_name" now`);
      }
    }
  }

  private async scopeLegacyKeys(): Promise<void> {
    const { scoped, clashes } = await this.indexStore.scopeLegacyKeys();
    if (scoped > 0) this.logger.log(`Scoped the dedupe keys of ${scoped} pending/running job(s) from an older version`);
    if (clashes > 0) {
      this.logger.warn(
        `${clashes} pending/running job(s) from an older version share a job name and dedupeKey with another live ` +
          'job; they keep running, but their keys no longer deduplicate',
      );
    }
  }
}

interface SetUpAttempts {
  /** Set when `indexSetupTimeoutMs` ran out: no further attempt starts. */
  over: boolean;
  /** The last transient failure, the cause of the timeout error. */
  lastError: unknown;
}

/** IndexOptionsConflict / IndexKeySpecsConflict: an index with this key or this name exists already, otherwise. */
const INDEX_CONFLICT_CODES: readonly unknown[] = [85, 86];

function isIndexConflict(error: unknown): boolean {
  return INDEX_CONFLICT_CODES.includes((error as { code?: unknown } | null)?.code);
}
