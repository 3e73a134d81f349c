import { describe, expect, it, jest } from '@jest/globals';
import { Types } from 'mongoose';
import { LimitedClaim, type LimitedTake } from '../../../lib/claim/limited-claim';
import type { RateTokensRepository } from '../../../lib/claim/rate-tokens.repository';
import type { FleetLimits } from '../../../lib/handlers/fleet-limits';
import type { JobClaimStore } from '../../../lib/persistence/job-claim.store';
import type { JobReadStore } from '../../../lib/persistence/job-read.store';

/**
 * A limited name's take whose first commands (a rate token, the slot holders) are answered after shutdown began sends
 * no write that could take a row, and gives its token back (long seed 4403: a rate token answered 2.4 s after SIGTERM,
 * then the row taken, its answer cut off by close(), and the row charged an attempt no handler ran). Controllable
 * stores: each answer can flip "shutdown began" as it comes back.
 */
function limitedClaim(onAnswer: { token?: () => void; holders?: () => void } = {}) {
  const token = { name: 't.rate', slot: 0 };
  const tokens = {
    ensureTokens: jest.fn(async () => undefined),
    take: jest.fn(async () => {
      onAnswer.token?.();
      return token;
    }),
    giveBack: jest.fn(async (_token: unknown) => undefined),
  };
  const row = { _id: new Types.ObjectId(), name: 't.rate', status: 'running' };
  const claims = {
    take: jest.fn(async () => row),
    takeById: jest.fn(async () => row),
    peek: jest.fn(async () => null),
    peekOutsideGroups: jest.fn(async () => ({ _id: row._id, group: null })),
    findSlotHolders: jest.fn(async () => {
      onAnswer.holders?.();
      return [];
    }),
    freeEndedSlots: jest.fn(async () => undefined),
  };
  const subject = new LimitedClaim(
    claims as unknown as JobClaimStore,
    {} as JobReadStore,
    tokens as unknown as RateTokensRepository,
  );
  return { subject, claims, tokens, token };
}

function request(limits: FleetLimits, stopped: () => boolean): LimitedTake {
  const at = new Date();
  return {
    name: 't.rate',
    limits,
    source: 'pending',
    at,
    lockId: 'w1#1',
    lockedUntil: new Date(at.getTime() + 30_000),
    skipIds: [],
    stopped,
  };
}

describe('LimitedClaim: shutdown beginning during a take', () => {
  const rate: FleetLimits = { rateLimit: { max: 4, perMs: 1_000 } };
  const global: FleetLimits = { globalConcurrency: 2 };

  it('takes the row when shutdown has not begun (the control)', async () => {
    const { subject, claims, tokens } = limitedClaim();
    const result = await subject.take(request(rate, () => false));
    expect(result.kind).toBe('taken');
    expect(claims.take).toHaveBeenCalledTimes(1);
    expect(tokens.giveBack).not.toHaveBeenCalled();
  });

  it('sends no row write once the rate token came back after shutdown began, and gives the token back', async () => {
    let started = false;
    const { subject, claims, tokens, token } = limitedClaim({ token: () => (started = true) });
    const result = await subject.take(request(rate, () => started));
    expect(result).toEqual({ kind: 'none' });
    expect(claims.take).not.toHaveBeenCalled();
    expect(claims.takeById).not.toHaveBeenCalled();
    expect(tokens.giveBack).toHaveBeenCalledWith(token);
  });

  it('sends no row write once the slot holders came back after shutdown began', async () => {
    let started = false;
    const { subject, claims } = limitedClaim({ holders: () => (started = true) });
    const result = await subject.take(request(global, () => started));
    expect(result).toEqual({ kind: 'none' });
    expect(claims.take).not.toHaveBeenCalled();
    expect(claims.takeById).not.toHaveBeenCalled();
  });
});
