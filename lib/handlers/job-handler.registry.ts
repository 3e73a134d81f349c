import { Injectable } from '@nestjs/common';
import { DuplicateJobHandlerError } from '../model/errors/duplicate-job-handler.error.js';
import type { RegisteredJobHandler } from './registered-job-handler.js';

/** name → handler. Filled by the explorer at bootstrap, read by the runner and JobsService. */
@Injectable()
export class JobHandlerRegistry {
  private readonly handlers = new Map<string, RegisteredJobHandler>();

  register(entry: RegisteredJobHandler): void {
    const existing = this.handlers.get(entry.name);
    if (existing) throw new DuplicateJobHandlerError(entry.name, existing.site, entry.site);
    this.handlers.set(entry.name, entry);
  }

  get(name: string): RegisteredJobHandler | undefined {
    return this.handlers.get(name);
  }

  all(): RegisteredJobHandler[] {
    return [...this.handlers.values()];
  }

  names(): string[] {
    return [...this.handlers.keys()];
  }

  get size(): number {
    return this.handlers.size;
  }
}
