import type { CommandStartedEvent, MongoClient } from 'mongodb';

/** Renewal traffic of one command name: round trips, the statements in them, and the leases those address. */
export interface RenewalTraffic {
  /** Commands carrying at least one renewal statement: what the server and the socket pay per call. */
  roundTrips: number;
  /** Renewal statements in them (an `update` command may carry many; a `findAndModify` carries one). */
  statements: number;
  /** Leases those statements renew: one per owner-fenced filter, `$or` branches and `_id: {$in}` counted out. */
  leases: number;
}

export interface RenewalTally {
  /** Renewal traffic by command name (`findAndModify`, `update`). */
  renewals: Record<string, RenewalTraffic>;
  /** Every command the client sent while counting, by name (renewals included). */
  allCommands: Record<string, number>;
}

/**
 * Counts lease renewals on the jobs collection through command monitoring, whatever shape the library sends them
 * in: one `findAndModify` per lease today, or a batched `update` with many statements. A renewal is recognised by
 * its owner fence (`lockedBy` in the filter) and its update, `$max: { lockedUntil }`; completions and claims `$set`
 * the deadline or unset it, relinquishes `$min` it.
 */
export class RenewalCounter {
  private active = false;
  private renewals = new Map<string, RenewalTraffic>();
  private all = new Map<string, number>();

  constructor(
    client: MongoClient,
    private readonly collectionName: string,
  ) {
    client.on('commandStarted', (event: CommandStartedEvent) => {
      if (this.active) this.record(event);
    });
  }

  start(): void {
    this.renewals.clear();
    this.all.clear();
    this.active = true;
  }

  stop(): RenewalTally {
    this.active = false;
    return { renewals: Object.fromEntries(this.renewals), allCommands: Object.fromEntries(this.all) };
  }

  private record(event: CommandStartedEvent): void {
    this.all.set(event.commandName, (this.all.get(event.commandName) ?? 0) + 1);
    if (event.command[event.commandName] !== this.collectionName) return;
    const leases = renewalStatements(event)
      .map(leasesRenewedBy)
      .filter((n) => n > 0);
    if (leases.length === 0) return;
    const traffic = this.renewals.get(event.commandName) ?? { roundTrips: 0, statements: 0, leases: 0 };
    traffic.roundTrips += 1;
    traffic.statements += leases.length;
    traffic.leases += leases.reduce((a, b) => a + b, 0);
    this.renewals.set(event.commandName, traffic);
  }
}

type Filter = Record<string, unknown>;
/** One write statement: its filter and its update. */
interface Statement {
  q: Filter;
  u: Filter;
}

/** The write statements a command carries (none for other commands). */
function renewalStatements(event: CommandStartedEvent): Statement[] {
  const { command } = event;
  if (event.commandName === 'findAndModify') return [{ q: command.query ?? {}, u: command.update ?? {} }];
  if (event.commandName === 'update' && Array.isArray(command.updates)) {
    return command.updates.map((statement: Partial<Statement>) => ({ q: statement.q ?? {}, u: statement.u ?? {} }));
  }
  return [];
}

/** How many leases one statement renews: 0 when it is no renewal. */
export function leasesRenewedBy({ q, u }: Statement): number {
  if (!isRenewalUpdate(u)) return 0;
  if ('lockedBy' in q) {
    const id = q._id as { $in?: unknown[] } | undefined;
    return id && typeof id === 'object' && Array.isArray(id.$in) ? id.$in.length : 1;
  }
  if (Array.isArray(q.$or)) return (q.$or as Filter[]).filter((branch) => 'lockedBy' in branch).length;
  return 0;
}

function isRenewalUpdate(update: Filter): boolean {
  const max = update.$max as Filter | undefined;
  return typeof max === 'object' && max !== null && 'lockedUntil' in max;
}

/** Totals over command names. */
export function totalTraffic(tally: RenewalTally): RenewalTraffic {
  const total = { roundTrips: 0, statements: 0, leases: 0 };
  for (const t of Object.values(tally.renewals)) {
    total.roundTrips += t.roundTrips;
    total.statements += t.statements;
    total.leases += t.leases;
  }
  return total;
}
