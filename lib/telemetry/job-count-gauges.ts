import type { Attributes, BatchObservableCallback, Meter, ObservableGauge } from '@opentelemetry/api';
import type { JobsRepository } from '../persistence/jobs.repository';
import * as names from './telemetry-names';

type CountRow = Awaited<ReturnType<JobsRepository['countByNameAndStatus']>>[number];

/**
 * The pending/running gauges per job name. They read the collection (one aggregate) at most once per
 * `metricsIntervalMs` per process, whatever the number of readers or exports: concurrent collections share one read,
 * and exports in between report it. A name reported once keeps being reported, as 0 when no row is left, so a
 * drained queue shows 0 instead of its last count.
 */
export class JobCountGauges {
  private readonly pending: ObservableGauge;
  private readonly running: ObservableGauge;
  private readonly gaugedNames = new Set<string>();
  private counts: CountRow[] = [];
  private countsReadAt = Number.NEGATIVE_INFINITY;
  private countsReading: Promise<void> | undefined;

  constructor(
    private readonly meter: Meter,
    private readonly repository: Pick<JobsRepository, 'countByNameAndStatus'>,
    private readonly metricsIntervalMs: number,
    private readonly attributesOf: (name: string) => Attributes,
  ) {
    this.pending = meter.createObservableGauge(names.METRIC_PENDING, {
      unit: '{job}',
      description: 'Pending jobs per name (read at most once per metricsIntervalMs).',
    });
    this.running = meter.createObservableGauge(names.METRIC_RUNNING, {
      unit: '{job}',
      description: 'Running jobs per name (read at most once per metricsIntervalMs).',
    });
    meter.addBatchObservableCallback(this.observe, [this.pending, this.running]);
  }

  /** No more reads or reports (module shutdown). */
  close(): void {
    this.meter.removeBatchObservableCallback(this.observe, [this.pending, this.running]);
  }

  /** Reports the last counts read; reads them again first when they are older than `metricsIntervalMs`. */
  private readonly observe: BatchObservableCallback = async (observer) => {
    if (Date.now() - this.countsReadAt >= this.metricsIntervalMs) {
      this.countsReading ??= this.readCounts().finally(() => {
        this.countsReading = undefined;
      });
      await this.countsReading;
    }
    const pending = new Map<string, number>();
    const running = new Map<string, number>();
    for (const row of this.counts) {
      const counts = row._id.status === 'pending' ? pending : row._id.status === 'running' ? running : undefined;
      if (!counts) continue;
      counts.set(row._id.name, row.count);
      this.gaugedNames.add(row._id.name);
    }
    for (const name of this.gaugedNames) {
      const attributes = this.attributesOf(name);
      observer.observe(this.pending, pending.get(name) ?? 0, attributes);
      observer.observe(this.running, running.get(name) ?? 0, attributes);
    }
  };

  private async readCounts(): Promise<void> {
    try {
      this.counts = await this.repository.countByNameAndStatus();
    } catch {
      // Reported as before until the next interval: a failing read is not retried on every export.
    } finally {
      this.countsReadAt = Date.now();
    }
  }
}
