import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  type CanActivate,
  Controller,
  type ExecutionContext,
  Get,
  type INestApplication,
  Injectable,
  type MiddlewareConsumer,
  Module,
  type NestModule,
  SetMetadata,
  type Type,
  UseGuards,
} from '@nestjs/common';
import { NestFactory, Reflector } from '@nestjs/core';
import { getConnectionToken, MongooseModule } from '@nestjs/mongoose';
import type { Connection } from 'mongoose';
import { InvalidOptionError, JobsModule, JobsService } from '../../lib';
import { JobsDashboardModule, type JobsDashboardOptions } from '../../lib/dashboard';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

// The two role guards of the NestJS docs, written as the docs show them. Both let a route through when it carries no
// roles metadata, which is why the dashboard needs `routeMetadata` to be guarded by them.

/** docs.nestjs.com/security/authorization: `SetMetadata('roles', …)`, read on the handler, then the class. */
const ROLES_KEY = 'roles';
const Roles = (...roles: string[]) => SetMetadata(ROLES_KEY, roles);

@Injectable()
class RolesGuard implements CanActivate {
  constructor(private reflector: Reflector) {}

  canActivate(context: ExecutionContext): boolean {
    const requiredRoles = this.reflector.getAllAndOverride<string[]>(ROLES_KEY, [
      context.getHandler(),
      context.getClass(),
    ]);
    if (!requiredRoles) {
      return true;
    }
    const { user } = context.switchToHttp().getRequest();
    return requiredRoles.some((role) => user.roles?.includes(role));
  }
}

/** docs.nestjs.com/guards: `Reflector.createDecorator`, read on the handler only. */
const HandlerRoles = Reflector.createDecorator<string[]>();

@Injectable()
class HandlerRolesGuard implements CanActivate {
  constructor(private reflector: Reflector) {}

  canActivate(context: ExecutionContext): boolean {
    const roles = this.reflector.get(HandlerRoles, context.getHandler());
    if (!roles) {
      return true;
    }
    const request = context.switchToHttp().getRequest();
    const user = request.user;
    return roles.some((role) => user.roles.includes(role));
  }
}

/** The same rule read from the controller class only: the metadata must be on the class as well as on each handler. */
@Injectable()
class ClassRolesGuard implements CanActivate {
  constructor(private reflector: Reflector) {}

  canActivate(context: ExecutionContext): boolean {
    const roles = this.reflector.get<string[] | undefined>(ROLES_KEY, context.getClass());
    if (!roles) return true;
    return roles.some((role) => context.switchToHttp().getRequest().user.roles.includes(role));
  }
}

/** A tiny stand-in for the app's auth: `x-user: admin` is an admin, anyone else a user without roles. */
function fakeAuth(request: { headers: Record<string, string>; user?: unknown }, _: unknown, next: () => void): void {
  request.user = request.headers['x-user'] === 'admin' ? { name: 'admin', roles: ['admin'] } : { roles: [] };
  next();
}

/** The app's own route, guarded as the docs show: the control that proves the guard and the fake auth work. */
@Controller('reports')
@UseGuards(RolesGuard)
@Roles('admin')
class ReportsController {
  @Get()
  list(): string[] {
    return [];
  }
}

async function startApp(
  label: string,
  dashboard: JobsDashboardOptions,
): Promise<{ app: INestApplication; url: string }> {
  @Module({
    imports: [
      MongooseModule.forRoot(testMongoUri(), { dbName: uniqueDatabaseName(label) }),
      JobsModule.forRoot({ worker: false }),
      JobsDashboardModule.forRoot(dashboard),
    ],
    controllers: [ReportsController],
  })
  class AppModule implements NestModule {
    configure(consumer: MiddlewareConsumer): void {
      consumer.apply(fakeAuth).forRoutes('*path');
    }
  }
  const app = await NestFactory.create(AppModule, { logger: false });
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as { port: number };
  return { app, url: `http://127.0.0.1:${port}/admin/jobs` };
}

const ADMIN = { 'x-user': 'admin' };
const MUTATION = { 'content-type': 'application/json', 'x-jobs-dashboard': '1' };
const rows = (app: INestApplication) => app.get<Connection>(getConnectionToken()).collection('jobs');

/** Every route the dashboard mounts, its page and assets included, for a job `id` (dead, so retry can act on it). */
function everyRoute(id: string): [method: 'GET' | 'POST', path: string, body?: unknown][] {
  return [
    ['GET', ''],
    ['GET', '/assets/dashboard.js'],
    ['GET', '/assets/dashboard.css'],
    ['GET', '/api/jobs'],
    ['GET', `/api/jobs/${id}`],
    ['GET', '/api/metrics'],
    ['GET', '/api/workers'],
    ['POST', '/api/jobs/retry', { name: 'guarded', status: 'dead' }],
    ['POST', `/api/jobs/${id}/retry`, {}],
    ['POST', `/api/jobs/${id}/cancel`, {}],
    ['POST', '/api/purge', { status: 'dead', name: 'guarded' }],
  ];
}

async function call(
  url: string,
  [method, path, body]: [string, string, unknown?],
  headers: Record<string, string>,
): Promise<number> {
  const init = method === 'POST' ? { headers: { ...headers, ...MUTATION }, body: JSON.stringify(body) } : { headers };
  return (await fetch(`${url}${path}`, { method, ...init })).status;
}

async function deadJob(app: INestApplication): Promise<string> {
  const id = (await app.get(JobsService).enqueue('guarded', { secret: 's3' }, { strict: false })).id;
  await rows(app).updateOne(
    { _id: new (await import('mongoose')).Types.ObjectId(id) },
    { $set: { status: 'dead', finishedAt: new Date(), attemptCount: 1, lastError: 'boom' } },
  );
  return id;
}

describe('the NestJS docs RolesGuard as the dashboard guard, without routeMetadata', () => {
  let started: { app: INestApplication; url: string };

  beforeAll(async () => {
    started = await startApp('route-metadata-none', { path: 'admin/jobs', guard: RolesGuard });
  });
  afterAll(() => started?.app.close());

  it('lets an anonymous request list and cancel jobs: the routes carry no roles, and that guard allows by default', async () => {
    const reports = started.url.replace('/admin/jobs', '/reports');
    expect([(await fetch(reports)).status, (await fetch(reports, { headers: ADMIN })).status]).toEqual([403, 200]);
    const id = (await started.app.get(JobsService).enqueue('open', {}, { strict: false })).id;
    expect(await call(started.url, ['GET', '/api/jobs'], {})).toBe(200);
    expect(await call(started.url, ['POST', `/api/jobs/${id}/cancel`, {}], {})).toBe(200);
    expect((await started.app.get(JobsService).findById(id))?.status).toBe('cancelled');
  });
});

describe.each([
  ['getAllAndOverride on handler and class (SetMetadata)', 'docs', RolesGuard, { [ROLES_KEY]: ['admin'] }],
  ['reflector.get on the handler (createDecorator)', 'handler', HandlerRolesGuard, { [HandlerRoles.KEY]: ['admin'] }],
  ['reflector.get on the class', 'class', ClassRolesGuard, { [ROLES_KEY]: ['admin'] }],
] as [string, string, Type<CanActivate>, Record<string, unknown>][])(
  'routeMetadata with a role guard reading %s',
  (_, label, guard, routeMetadata) => {
    let started: { app: INestApplication; url: string };

    beforeAll(async () => {
      started = await startApp(`route-metadata-${label}`, { path: 'admin/jobs', guard, routeMetadata });
    });
    afterAll(() => started?.app.close());

    it('answers 403 to an anonymous request on every route, page and assets included, and changes nothing', async () => {
      const id = await deadJob(started.app);
      const before = await rows(started.app).find({ name: 'guarded' }).toArray();
      const statuses = [];
      for (const route of everyRoute(id)) statuses.push([route[0], route[1], await call(started.url, route, {})]);
      expect(statuses).toEqual(everyRoute(id).map(([method, path]) => [method, path, 403]));
      expect(await rows(started.app).find({ name: 'guarded' }).toArray()).toEqual(before);
    });

    it('serves every route to an admin', async () => {
      const id = await deadJob(started.app);
      const statuses = [];
      for (const route of everyRoute(id)) statuses.push([route[0], route[1], await call(started.url, route, ADMIN)]);
      expect(statuses).toEqual(everyRoute(id).map(([method, path]) => [method, path, 200]));
    });
  },
);

describe('routeMetadata validation', () => {
  const guard = RolesGuard;
  it('refuses what is not a plain object with string keys, or a key Nest itself uses, with InvalidOptionError', () => {
    const bad: unknown[] = [
      null,
      'roles',
      ['admin'],
      new Map([['roles', ['admin']]]),
      { [Symbol('roles')]: ['admin'] },
      { '': ['admin'] },
      { __guards__: [] },
      { path: 'elsewhere' },
      { 'design:paramtypes': [] },
    ];
    for (const routeMetadata of bad) {
      expect(() => JobsDashboardModule.forRoot({ guard, routeMetadata: routeMetadata as never })).toThrow(
        InvalidOptionError,
      );
    }
    expect(() => JobsDashboardModule.forRoot({ guard, routeMetadata: { roles: ['admin'] } })).not.toThrow();
    expect(() =>
      JobsDashboardModule.forRoot({ guard, routeMetadata: Object.assign(Object.create(null), { roles: ['admin'] }) }),
    ).not.toThrow();
  });
});
