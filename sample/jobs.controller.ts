import { Body, Controller, Get, HttpException, HttpStatus, NotFoundException, Param, Post } from '@nestjs/common';
import { JobsError, JobsService } from '../lib';

/** A small REST face on JobsService: enqueue by name with a JSON payload, read a job back. */
@Controller('jobs')
export class JobsController {
  constructor(private readonly jobs: JobsService) {}

  @Post(':name')
  async enqueue(@Param('name') name: string, @Body() payload: unknown) {
    try {
      return await this.jobs.enqueue(name, payload ?? {});
    } catch (error) {
      // Validation errors are the caller's fault: say what was wrong.
      if (error instanceof JobsError)
        throw new HttpException({ error: error.name, message: error.message }, HttpStatus.BAD_REQUEST);
      throw error;
    }
  }

  @Get('stats')
  stats() {
    return this.jobs.stats();
  }

  @Get(':id')
  async find(@Param('id') id: string) {
    try {
      const job = await this.jobs.findById(id);
      if (!job) throw new NotFoundException(`No job ${id}`);
      return job;
    } catch (error) {
      if (error instanceof JobsError)
        throw new HttpException({ error: error.name, message: error.message }, HttpStatus.BAD_REQUEST);
      throw error;
    }
  }
}
