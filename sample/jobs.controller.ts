import { Body, Controller, Get, Param, Post, UseFilters } from '@nestjs/common';
import { JobsExceptionFilter, JobsService, requireJob } from '../lib';

/**
 * A small REST face on JobsService: enqueue by name with a JSON payload, read a job back. No try/catch: the filter
 * answers the library's errors (400 unknown name or bad payload, 404 malformed or unknown id).
 */
@Controller('jobs')
@UseFilters(JobsExceptionFilter)
export class JobsController {
  constructor(private readonly jobs: JobsService) {}

  @Post(':name')
  enqueue(@Param('name') name: string, @Body() payload: unknown) {
    return this.jobs.enqueue(name, payload ?? {});
  }

  @Get('stats')
  stats() {
    return this.jobs.stats();
  }

  @Get(':id')
  find(@Param('id') id: string) {
    return requireJob(id, this.jobs.findById(id));
  }
}
