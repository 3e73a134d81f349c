export { JOB_HANDLER_METADATA } from './jobs.constants';
