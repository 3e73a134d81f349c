import { type ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { EnqueuedJobRecord, EnqueueOptions, JobsModuleOptions, JobsWorkerStatus } from '../../lib';
import { sleep } from './sleep';

const WORKER_SCRIPT = resolve('test/support/chaos-worker.cjs');
const READY_TIMEOUT_MS = 30_000;
const LOG_LINES_KEPT = 200;

export interface ChaosClusterOptions {
  /** Where the workers' jobs connection goes (the server, or a TcpProxy in front of it). */
  jobsUri: string;
  /** Where the execution records go: straight to the server, so chaos never touches the evidence. */
  recordUri: string;
  dbName: string;
  jobs: JobsModuleOptions;
  /** Extra `MongooseModule.forRoot` options (driver timeouts for fast failure and recovery). */
  mongoose?: Record<string, unknown>;
  /**
   * Also register `chaos.limited` (the same work under `globalConcurrency: 2`). Off by default: a limited name changes
   * how every claim is made (limited names are claimed on their own), which the other chaos scenarios do not test.
   */
  limited?: boolean;
}

export interface UnexpectedExit {
  worker: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  output: string[];
}

/** A worker's answer to an enqueue request. */
interface EnqueueAnswer {
  job?: EnqueuedJobRecord;
  error?: { name?: string; message?: string };
}

/** One worker process (a chaos-worker.cjs child). */
export class ChaosWorker {
  readonly ready: Promise<void>;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  isReady = false;
  /** Signal the test sent, if any: an exit after it is expected, any other exit is a crash. */
  killedWith: NodeJS.Signals | undefined;
  /** The last lines this worker printed. */
  readonly output: string[] = [];
  private readonly pendingStatus = new Map<number, (status: JobsWorkerStatus) => void>();
  private readonly pendingEnqueues = new Map<number, (answer: EnqueueAnswer) => void>();
  private nextStatusId = 0;
  private readonly log: (line: string) => void;

  constructor(
    readonly id: string,
    readonly child: ChildProcess,
    log: (line: string) => void,
  ) {
    this.log = (line) => {
      this.output.push(line);
      if (this.output.length > LOG_LINES_KEPT) this.output.shift();
      log(line);
    };
    this.exited = new Promise((done) => child.once('exit', (code, signal) => done({ code, signal })));
    child.on('error', (error) => this.log(`${id} ! child process error: ${error.message}`));
    this.ready = new Promise<void>((done, fail) => {
      const timer = setTimeout(
        () => fail(new Error(`${id} not ready within ${READY_TIMEOUT_MS} ms`)),
        READY_TIMEOUT_MS,
      );
      if (child.stdout) {
        createInterface({ input: child.stdout }).on('line', (line) => {
          if (line === 'READY') {
            this.isReady = true;
            clearTimeout(timer);
            done();
          } else this.log(`${id} | ${line}`);
        });
      }
      void this.exited.then(({ code, signal }) => {
        clearTimeout(timer);
        const output = this.output.join('\n');
        fail(new Error(`${id} exited before it was ready (code ${code}, signal ${signal}):\n${output}`));
      });
    });
    this.ready.catch(() => undefined); // observed by whoever awaits it
    if (child.stderr) createInterface({ input: child.stderr }).on('line', (line) => this.log(`${id} ! ${line}`));
    child.on('message', (message: { type?: string; id?: number; status?: JobsWorkerStatus } & EnqueueAnswer) => {
      if (message.id === undefined) return;
      if (message.type === 'enqueued') {
        this.pendingEnqueues.get(message.id)?.(message);
        this.pendingEnqueues.delete(message.id);
      }
      if (message.type !== 'status' || !message.status) return;
      this.pendingStatus.get(message.id)?.(message.status);
      this.pendingStatus.delete(message.id);
    });
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** `JobsService.workerStatus()` of this process, over IPC. */
  status(timeoutMs = 500): Promise<JobsWorkerStatus> {
    const id = this.nextStatusId++;
    return new Promise((done, fail) => {
      const timer = setTimeout(() => {
        this.pendingStatus.delete(id);
        fail(new Error(`${this.id} did not answer a status request`));
      }, timeoutMs + 5_000);
      this.pendingStatus.set(id, (status) => {
        clearTimeout(timer);
        done(status);
      });
      // With a callback, a send to a worker that is gone fails this request instead of emitting 'error'.
      this.child.send({ type: 'status', id, timeoutMs }, (error) => {
        if (!error) return;
        clearTimeout(timer);
        this.pendingStatus.delete(id);
        fail(error);
      });
    });
  }

  /** `JobsService.enqueue` in this process, over IPC (options without a session); rejects with its error's message. */
  enqueue(name: string, payload: unknown, options: Omit<EnqueueOptions, 'session'> = {}): Promise<EnqueuedJobRecord> {
    const id = this.nextStatusId++;
    return new Promise((done, fail) => {
      this.pendingEnqueues.set(id, ({ job, error }) => {
        if (job) done(job);
        else fail(new Error(`${this.id}: enqueue failed: ${error?.name}: ${error?.message}`));
      });
      this.child.send({ type: 'enqueue', id, name, payload, options }, (error) => {
        if (!error) return;
        this.pendingEnqueues.delete(id);
        fail(error);
      });
    });
  }

  kill(signal: NodeJS.Signals): void {
    if (!this.alive) return;
    this.killedWith = signal;
    this.child.kill(signal);
  }
}

/**
 * Worker processes for the chaos tests. Every process started here is SIGKILLed by `killAll()`;
 * call it in afterAll/afterEach. The children also exit by themselves if this process dies (IPC).
 */
export class ChaosCluster {
  private readonly workers = new Set<ChaosWorker>();
  private started = 0;
  /** Workers that exited without being killed by the test: crashes. */
  readonly unexpectedExits: UnexpectedExit[] = [];
  /** The last lines the workers printed (for failure messages). */
  readonly logs: string[] = [];

  constructor(private readonly options: ChaosClusterOptions) {}

  /** Starts a worker; await `worker.ready` for it to have booted. */
  spawn(name = `w${this.started}`): ChaosWorker {
    this.started += 1;
    const id = `${name}.${this.started}`;
    const child = spawn(process.execPath, ['--no-warnings=ExperimentalWarning', WORKER_SCRIPT], {
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      serialization: 'advanced', // Dates in workerStatus() arrive as Dates
      env: {
        ...process.env,
        CHAOS_JOBS_URI: this.options.jobsUri,
        CHAOS_RECORD_URI: this.options.recordUri,
        CHAOS_DB: this.options.dbName,
        CHAOS_WORKER_ID: id,
        CHAOS_JOBS_OPTIONS: JSON.stringify(this.options.jobs),
        CHAOS_MONGOOSE_OPTIONS: JSON.stringify(this.options.mongoose ?? {}),
        CHAOS_LIMITED: this.options.limited ? '1' : '',
      },
    });
    const worker = new ChaosWorker(id, child, (line) => {
      this.logs.push(line);
      if (this.logs.length > LOG_LINES_KEPT) this.logs.shift();
    });
    this.workers.add(worker);
    void worker.exited.then((exit) => {
      this.workers.delete(worker);
      if (!worker.killedWith) this.unexpectedExits.push({ worker: id, ...exit, output: worker.output.slice(-20) });
    });
    return worker;
  }

  get alive(): ChaosWorker[] {
    return [...this.workers].filter((worker) => worker.alive);
  }

  /**
   * Resolves when `predicate` holds (polled every 50 ms). Rejects at once if a worker crashed, or after
   * `timeoutMs` with `what()` and the workers' last log lines.
   */
  async waitFor(predicate: () => boolean | Promise<boolean>, what: () => string, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await predicate())) {
      if (this.unexpectedExits.length > 0) {
        throw new Error(
          `A worker crashed while waiting for ${what()}: ${JSON.stringify(this.unexpectedExits, null, 2)}`,
        );
      }
      if (Date.now() > deadline) {
        throw new Error(`Timed out waiting for ${what()}; worker logs:\n${this.logs.join('\n')}`);
      }
      await sleep(50);
    }
  }

  /** SIGKILLs every worker still running and waits for them to be gone. */
  async killAll(): Promise<void> {
    const workers = [...this.workers];
    for (const worker of workers) worker.kill('SIGKILL');
    await Promise.all(workers.map((worker) => worker.exited));
  }
}
