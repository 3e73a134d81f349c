import type { Attributes, BatchObservableCallback, Meter, ObservableGauge } from '@opentelemetry/api';
import type { JobReadStore } from '../persistence/job-read.store.js';
import * as names from './telemetry-names.js';

/** What one read of the counts reports, per label value: until the next read, every export reports it. */
interface GaugedLabel {
  label: string;
  pending: number;
  running: number;
}

/**
 * The pending/running gauges per job name label (`MetricLabels`: names without a label of their own are summed under
 * `_other`). They read the collection (one aggregate) at most once per `metricsIntervalMs` per process, whatever the
 * number of readers or exports: concurrent collections share one read, and exports in between report it.
 *
 * A label is reported while it has pending or running rows (both gauges, 0 for the status it has none of). The read
 * that finds none left reports it as 0 one last time, then it is no longer reported: names that come and go do not
 * stay series forever, and an SDK that keeps exporting a series' last value once it is no longer observed (the
 * JavaScript SDK does under cumulative temporality) keeps exporting 0, not a stale count.
 */
export class JobCountGauges {
  private readonly pending: ObservableGauge;
  private readonly running: ObservableGauge;
  private gauged: GaugedLabel[] = [];
  private countsReadAt = Number.NEGATIVE_INFINITY;
  private countsReading: Promise<void> | undefined;

  constructor(
    private readonly meter: Meter,
    private readonly reads: Pick<JobReadStore, 'countByNameAndStatus'>,
    private readonly metricsIntervalMs: number,
    /** The label value a job name is reported under. */
    private readonly labelOf: (name: string) => string,
    /** The attributes of a label value. */
    private readonly attributesOf: (label: string) => Attributes,
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
    for (const { label, pending, running } of this.gauged) {
      const attributes = this.attributesOf(label);
      observer.observe(this.pending, pending, attributes);
      observer.observe(this.running, running, attributes);
    }
  };

  private async readCounts(): Promise<void> {
    try {
      const rows = await this.reads.countByNameAndStatus();
      const counts = new Map<string, GaugedLabel>();
      for (const { _id, count } of rows) {
        // A hand-written row may lack a name: it has no label to count under.
        if ((_id.status !== 'pending' && _id.status !== 'running') || typeof _id.name !== 'string') continue;
        const label = this.labelOf(_id.name);
        const entry = counts.get(label) ?? { label, pending: 0, running: 0 };
        entry[_id.status] += count;
        counts.set(label, entry);
      }
      // Labels reported by the last read with no row left now: 0 this time, not reported after.
      const emptied = this.gauged.filter(({ label, pending, running }) => pending + running > 0 && !counts.has(label));
      this.gauged = [...counts.values(), ...emptied.map(({ label }) => ({ label, pending: 0, running: 0 }))];
    } catch {
      // Reported as before until the next interval: a failing read is not retried on every export.
    } finally {
      this.countsReadAt = Date.now();
    }
  }
}
