import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import { JOBS_LOGGER_CONTEXT, JOBS_RESOLVED_OPTIONS } from '../jobs.constants';
import type { ResolvedJobsOptions } from '../jobs.options';
import { type BoundJobHandler, JobHandlerRegistry } from './job-handler.registry';
import { resolveJobHandler } from './job-handler-options.resolver';
import { JobsMetadataAccessor } from './jobs-metadata.accessor';

/** Finds `@JobHandler` methods on providers and controllers and binds them into the registry. */
@Injectable()
export class JobsExplorer implements OnModuleInit {
  private readonly logger = new Logger(JOBS_LOGGER_CONTEXT);

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly accessor: JobsMetadataAccessor,
    private readonly registry: JobHandlerRegistry,
    @Inject(JOBS_RESOLVED_OPTIONS) private readonly options: ResolvedJobsOptions,
  ) {}

  onModuleInit(): void {
    const wrappers: InstanceWrapper[] = [...this.discovery.getProviders(), ...this.discovery.getControllers()];
    for (const wrapper of wrappers) this.explore(wrapper);
  }

  private explore(wrapper: InstanceWrapper): void {
    const { instance } = wrapper;
    const isStatic = wrapper.isDependencyTreeStatic();
    // Request-scoped providers have no instance yet: read their class so they can be reported.
    const prototype = isStatic ? instance && Object.getPrototypeOf(instance) : wrapper.metatype?.prototype;
    if (!prototype || typeof prototype !== 'object') return;
    const className = prototype.constructor?.name ?? 'Anonymous';
    for (const methodName of this.scanner.getAllMethodNames(prototype)) {
      const method = prototype[methodName];
      const metadata = this.accessor.getJobHandlerMetadata(method);
      if (!metadata) continue;
      const site = `${className}.${methodName}`;
      if (!isStatic) {
        // A request-scoped instance only exists inside a request; a background job has none.
        this.logger.warn(
          `Skipping @JobHandler('${String(metadata.name)}') on ${site}: request-scoped providers cannot run jobs`,
        );
        continue;
      }
      const bound = method.bind(instance) as BoundJobHandler;
      this.registry.register(resolveJobHandler(metadata, bound, site, this.options));
    }
  }
}
