import { type CanActivate, type ExecutionContext, ForbiddenException } from '@nestjs/common';
import { type CrossSiteCheckRequest, crossSiteRefusal } from './cross-site-request.js';

/** The header every state-changing dashboard call carries. */
export const DASHBOARD_HEADER = 'x-jobs-dashboard';

/**
 * Lets a state-changing call through only with `x-jobs-dashboard: 1` and a JSON body (a form post, a link or an image
 * from another site can set neither), and only from the dashboard's own origin or one in `allowedOrigins`: an app's
 * CORS policy may let another origin's fetch send that header with the admin's cookies, so the origin is checked here,
 * whatever CORS allows (see `crossSiteRefusal`).
 */
export class DashboardRequestGuard implements CanActivate {
  constructor(private readonly allowedOrigins: ReadonlySet<string>) {}

  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<CrossSiteCheckRequest>();
    const { headers } = request;
    const contentType = headers['content-type'];
    const json = typeof contentType === 'string' && /^application\/json\s*(;|$)/i.test(contentType);
    if (headers[DASHBOARD_HEADER] !== '1' || !json) {
      throw new ForbiddenException(
        `State-changing dashboard calls need the header ${DASHBOARD_HEADER}: 1 and a JSON body (content-type: application/json)`,
      );
    }
    const refusal = crossSiteRefusal(request, this.allowedOrigins);
    if (refusal !== null) {
      throw new ForbiddenException(
        `Cross-site state-changing dashboard call refused: ${refusal}; list the calling origin in allowedOrigins to allow it`,
      );
    }
    return true;
  }
}
