import { type CanActivate, type ExecutionContext, ForbiddenException, Injectable } from '@nestjs/common';

/** The header every state-changing dashboard call carries. */
export const DASHBOARD_HEADER = 'x-jobs-dashboard';

/**
 * Lets a state-changing call through only with `x-jobs-dashboard: 1` and a JSON body: a form post, a link or an image
 * from another site can set neither (a cross-site fetch that does needs a CORS preflight the app does not grant), so
 * a logged-in admin's browser cannot be made to retry, cancel or purge jobs behind their back.
 */
@Injectable()
export class DashboardRequestGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const { headers } = context.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>();
    const json = /^application\/json\s*(;|$)/i.test(headers['content-type'] ?? '');
    if (headers[DASHBOARD_HEADER] !== '1' || !json) {
      throw new ForbiddenException(
        `State-changing dashboard calls need the header ${DASHBOARD_HEADER}: 1 and a JSON body (content-type: application/json)`,
      );
    }
    return true;
  }
}
