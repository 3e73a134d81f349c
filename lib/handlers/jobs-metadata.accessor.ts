import { Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { JOB_HANDLER_METADATA } from '../model/jobs.constants.js';
import type { JobHandlerMetadata } from './job-handler.options.js';

/** Reads `@JobHandler` metadata off a method. */
@Injectable()
export class JobsMetadataAccessor {
  constructor(private readonly reflector: Reflector) {}

  getJobHandlerMetadata(method: (...args: unknown[]) => unknown): JobHandlerMetadata | undefined {
    return this.reflector.get<JobHandlerMetadata | undefined>(JOB_HANDLER_METADATA, method);
  }
}
