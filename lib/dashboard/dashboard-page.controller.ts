import {
  Controller,
  Get,
  Header,
  NotFoundException,
  Param,
  Req,
  StreamableFile,
  type Type,
  UseGuards,
} from '@nestjs/common';
import { loadDashboardPage } from './dashboard-page.js';
import type { ResolvedDashboardOptions } from './jobs-dashboard.options.js';
import { DashboardRouteMetadata } from './route-metadata.js';

/** Same-origin only: the page runs its own script and styles and talks to its own API, nothing inline or remote. */
const CONTENT_SECURITY_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'self'; form-action 'none'; frame-ancestors 'none'";

/** The dashboard's page at `<path>` and its assets at `<path>/assets/<file>`, behind the same guard as its API. */
export function createDashboardPageController(options: ResolvedDashboardOptions): Type<unknown> {
  const page = loadDashboardPage();
  const guards = options.guard ? [options.guard] : [];

  @Controller(options.path)
  @UseGuards(...guards)
  @DashboardRouteMetadata(options.routeMetadata)
  class JobsDashboardPageController {
    @Get()
    @Header('Content-Type', 'text/html; charset=utf-8')
    @Header('Content-Security-Policy', CONTENT_SECURITY_POLICY)
    @Header('Cache-Control', 'no-store')
    index(@Req() request: { originalUrl?: string; url: string }): string {
      // The base is the URL the page was reached at (global prefix included), so its relative URLs resolve under it.
      const pathname = (request.originalUrl ?? request.url).split(/[?#]/)[0] ?? '/';
      const base = `${pathname.replace(/\/+$/, '')}/`;
      return page.html.replace('__BASE__', escapeAttribute(base)).replace('__READ_ONLY__', String(options.readOnly));
    }

    @Get('assets/:file')
    asset(@Param('file') file: string): StreamableFile {
      const asset = page.assets.get(file);
      if (!asset) throw new NotFoundException(`No dashboard asset ${JSON.stringify(file)}`);
      return new StreamableFile(asset.body, { type: asset.contentType, length: asset.body.length });
    }
  }
  return JobsDashboardPageController;
}

function escapeAttribute(value: string): string {
  return value.replace(/[&"<>]/g, (char) => `&#${char.charCodeAt(0)};`);
}
