import { Injectable } from '@nestjs/common';
import { JobHandler } from '../../lib';
import { JobClaimService } from '../../lib/claim/job-claim.service';
import { JobClaimStore } from '../../lib/persistence/job-claim.store';
import { type BenchContext, benchDbName, createBenchApp, dropDatabase, insertPendingJobs } from './bench-app';
import { type BenchConfig, fmt, fmtInt, formatTable, log, medianOf, nowMs, percentile } from './helpers';

const JOB = 'bench.depth';

/** Claims take only names with a handler in the process: the queue's name needs one (it never runs, worker: false). */
@Injectable()
class DepthJobs {
  @JobHandler(JOB)
  noop(): void {}
}

export interface DepthRep {
  depth: number;
  claimsMs: number[];
  p50Ms: number;
  p95Ms: number;
  /** The two queries inside each claimNext: the expired-lease look-up (finds nothing here) and the due claim. */
  reclaimP50Ms: number;
  claimDueP50Ms: number;
}

/**
 * Claim latency vs queue depth: `JobClaimService.claimNext()` timed one call at a time with 1,000 and 50,000 due
 * pending rows. The app has `worker: false`, so its poll loop does not compete; rows are bulk-inserted raw.
 */
export async function runQueueDepth(ctx: BenchContext, config: BenchConfig) {
  const depths = [config.depthSmall, config.depthLarge];
  const reps: DepthRep[] = [];
  const setupMs: Record<number, number> = {};
  for (const depth of depths) {
    const dbName = benchDbName(`depth_${depth}`);
    const app = await createBenchApp(ctx.uri, dbName, { worker: false }, [DepthJobs]);
    const collection = ctx.client.db(dbName).collection('jobs');
    try {
      const t0 = nowMs();
      await insertPendingJobs(collection, JOB, depth);
      setupMs[depth] = nowMs() - t0;
      log(`queue depth ${fmtInt(depth)}: inserted in ${fmtInt(setupMs[depth])} ms`);
      const claims = app.get(JobClaimService);
      const queries = timeQueries(app.get(JobClaimStore));
      // Put claimed rows back, so every repetition sees exactly `depth` due rows.
      const reset = () =>
        collection.updateMany(
          { status: 'running' },
          { $set: { status: 'pending' }, $unset: { lockedBy: '', lockedUntil: '', startedAt: '' } },
        );
      for (let i = 0; i < 5; i += 1) await claims.claimNext(); // warm-up
      await reset();
      for (let rep = 1; rep <= config.repetitions; rep += 1) {
        log(`queue depth rep ${rep}/${config.repetitions}: ${config.depthClaims} claims at depth ${fmtInt(depth)}`);
        const claimsMs: number[] = [];
        queries.reset();
        for (let i = 0; i < config.depthClaims; i += 1) {
          const start = nowMs();
          const claim = await claims.claimNext();
          claimsMs.push(nowMs() - start);
          if (!claim) throw new Error(`claimNext found nothing at depth ${depth}`);
        }
        await reset();
        reps.push({
          depth,
          claimsMs,
          p50Ms: percentile(claimsMs, 50),
          p95Ms: percentile(claimsMs, 95),
          reclaimP50Ms: percentile(queries.reclaimMs, 50),
          claimDueP50Ms: percentile(queries.claimDueMs, 50),
        });
      }
    } finally {
      await app.close();
      await dropDatabase(ctx.client.db(dbName));
    }
  }
  const ofDepth = (depth: number) => reps.filter((r) => r.depth === depth);
  const small = medianOf(ofDepth(config.depthSmall), (r) => r.p50Ms);
  const table = formatTable(
    `5. Claim latency vs queue depth: ${config.depthClaims} sequential claimNext() calls per rep (ms, medians of reps)`,
    ['due pending rows', 'p50', 'p95', 'p50 vs smallest', 'reclaim query p50', 'claim query p50'],
    depths.map((depth) => {
      const reps = ofDepth(depth);
      const p50 = medianOf(reps, (r) => r.p50Ms);
      return [
        fmtInt(depth),
        fmt(p50, 2),
        fmt(
          medianOf(reps, (r) => r.p95Ms),
          2,
        ),
        `${fmt(p50 / small, 2)}×`,
        fmt(
          medianOf(reps, (r) => r.reclaimP50Ms),
          2,
        ),
        fmt(
          medianOf(reps, (r) => r.claimDueP50Ms),
          2,
        ),
      ];
    }),
  );
  return { config: { depths, claims: config.depthClaims }, setupMs, reps, table };
}

/** Times the claim store's two claim queries on the app's own instance (claimNext calls them through it). */
function timeQueries(claims: JobClaimStore) {
  let reclaimMs: number[] = [];
  let claimDueMs: number[] = [];
  const timed = async <T>(into: () => number[], query: () => Promise<T>): Promise<T> => {
    const start = nowMs();
    try {
      return await query();
    } finally {
      into().push(nowMs() - start);
    }
  };
  const take = claims.take.bind(claims);
  claims.take = (...args: Parameters<JobClaimStore['take']>) =>
    timed(
      () => (args[0] === 'running' ? reclaimMs : claimDueMs),
      () => take(...args),
    );
  return {
    get reclaimMs() {
      return reclaimMs;
    },
    get claimDueMs() {
      return claimDueMs;
    },
    reset() {
      reclaimMs = [];
      claimDueMs = [];
    },
  };
}
