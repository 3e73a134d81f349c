import { JobsError } from './jobs.error.js';

/** `JobsDashboardModule.forRoot` was given no `guard` and not `allowAnonymous: true`: the dashboard would be open. */
export class DashboardGuardRequiredError extends JobsError {
  constructor() {
    super(
      'JobsDashboardModule.forRoot needs a guard: pass `guard: YourAuthGuard` (a Nest CanActivate class, resolved ' +
        'through DI) so only your admins can read and change jobs, or set `allowAnonymous: true` to serve it to ' +
        'anyone who can reach the app (only behind a private network or a proxy that authenticates).',
    );
  }
}
