import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import { JobsModuleImportedTwiceError } from '../model/errors/jobs-module-imported-twice.error.js';
import { hasBrand, packageBrand, setBrand } from '../model/errors/package-brand.js';
import { RequestScopedJobHandlerError } from '../model/errors/request-scoped-job-handler.error.js';
import { JOBS_RESOLVED_OPTIONS } from '../model/jobs.constants.js';
import type { ResolvedJobsOptions } from '../model/jobs.options.js';
import { JobHandlerRegistry } from './job-handler.registry.js';
import { resolveJobHandler } from './job-handler-options.resolver.js';
import { JobsMetadataAccessor } from './jobs-metadata.accessor.js';
import type { BoundJobHandler } from './registered-job-handler.js';

const JOBS_EXPLORER = packageBrand('JobsExplorer');

/** Finds `@JobHandler` methods on providers and controllers and binds them into the registry. */
@Injectable()
export class JobsExplorer implements OnModuleInit {
  private explored = false;
  private failure?: { error: unknown };

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly accessor: JobsMetadataAccessor,
    private readonly registry: JobHandlerRegistry,
    @Inject(JOBS_RESOLVED_OPTIONS) private readonly options: ResolvedJobsOptions,
  ) {}

  onModuleInit(): void {
    this.exploreOnce();
  }

  /**
   * Fills the registry, the first time only. Also called by the first enqueue, which may come from another module's
   * `onModuleInit` before ours ran: it must validate names and pick handler options as any later enqueue does.
   */
  exploreOnce(): void {
    if (this.explored) return;
    // A failed exploration left the registry partial: every later call (our onModuleInit included) throws it again,
    // so bootstrap fails even when the enqueue that explored first swallowed the error.
    if (this.failure) throw this.failure.error;
    try {
      const providers = this.discovery.getProviders();
      this.assertSingleJobsModule(providers);
      for (const wrapper of [...providers, ...this.discovery.getControllers()]) this.explore(wrapper);
    } catch (error) {
      this.failure = { error };
      throw error;
    }
    this.explored = true;
  }

  /**
   * Each JobsModule import brings its own worker and JobsService: two in one application is always a mistake. The
   * other build's JobsModule counts too (its JobsExplorer is another class, with the same brand).
   */
  private assertSingleJobsModule(providers: InstanceWrapper[]): void {
    const explorers = providers.filter((wrapper) => hasBrand(wrapper.metatype, JOBS_EXPLORER));
    if (explorers.length < 2) return;
    const bothBuilds = explorers.some((wrapper) => wrapper.metatype !== JobsExplorer);
    throw new JobsModuleImportedTwiceError(explorers.length, bothBuilds);
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
      // A request-scoped instance only exists inside a request; a background job has none, so it could never run.
      if (!isStatic) throw new RequestScopedJobHandlerError(String(metadata.name), site);
      const bound = method.bind(instance) as BoundJobHandler;
      this.registry.register(resolveJobHandler(metadata, bound, site, this.options));
    }
  }
}

setBrand(JobsExplorer, JOBS_EXPLORER);
