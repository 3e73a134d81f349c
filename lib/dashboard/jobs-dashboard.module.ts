import { type DynamicModule, Module } from '@nestjs/common';
import { createDashboardControllers } from './dashboard-controllers.js';
import { type JobsDashboardOptions, resolveDashboardOptions } from './jobs-dashboard.options.js';

/**
 * The jobs dashboard's page at `<path>` and JSON API under `<path>/api/`, next to a `JobsModule` import. Every route is
 * behind `guard` (which must deny by default; `routeMetadata` gives the routes the metadata a role guard reads);
 * state-changing calls are `POST` with a JSON body and the header `x-jobs-dashboard: 1`, from the dashboard's own
 * origin or one of `allowedOrigins` (403 otherwise, whatever the app's CORS policy).
 * @throws DashboardGuardRequiredError without a `guard` unless `allowAnonymous: true`.
 * @throws InvalidOptionError for a malformed path, a guard that is not a class, `routeMetadata` that is not a plain
 * object of string keys (or uses one of Nest's own keys), an `allowedOrigins` entry that is not an origin, or an
 * unknown option.
 * @example
 * ```ts
 * @Module({
 *   imports: [
 *     JobsModule.forRoot(),
 *     JobsDashboardModule.forRoot({ path: 'admin/jobs', guard: RolesGuard, routeMetadata: { roles: ['admin'] } }),
 *   ],
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
