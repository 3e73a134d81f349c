import { type DynamicModule, Module } from '@nestjs/common';
import { createDashboardControllers } from './dashboard-controllers';
import { type JobsDashboardOptions, resolveDashboardOptions } from './jobs-dashboard.options';

/**
 * The jobs dashboard's JSON API under `<path>/api/`, next to a `JobsModule` import. Every route is behind `guard`;
 * state-changing calls are `POST` with a JSON body and the header `x-jobs-dashboard: 1` (403 otherwise).
 * @throws DashboardGuardRequiredError without a `guard` unless `allowAnonymous: true`.
 * @throws InvalidOptionError for a malformed path, a guard that is not a class, or an unknown option.
 * @example
 * ```ts
 * @Module({
 *   imports: [JobsModule.forRoot(), JobsDashboardModule.forRoot({ path: 'admin/jobs', guard: AdminGuard })],
 * })
 * export class AppModule {}
 * ```
 */
@Module({})
export class JobsDashboardModule {
  static forRoot(options: JobsDashboardOptions = {}): DynamicModule {
    return { module: JobsDashboardModule, controllers: createDashboardControllers(resolveDashboardOptions(options)) };
  }
}
