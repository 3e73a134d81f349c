import type { Model, mongo } from 'mongoose';
import type { JobDocument } from '../model/job-document.js';
import { type MonitoredClient, watchRetryableWriteServers } from './retryable-write-servers.js';

/**
 * The jobs model's native collection: hot paths skip mongoose casting, which buys nothing for their fixed shapes.
 * Every store reaches the database through it, so it is also where the client starts telling which of its servers take
 * retryable writes (what `mayHaveLanded` needs to read a failed selection on a direct connection).
 */
export function jobsCollection(model: Model<JobDocument>): mongo.Collection<JobDocument> {
  const client = model.db?.getClient?.() as MonitoredClient | undefined;
  if (client) watchRetryableWriteServers(client);
  return model.collection as unknown as mongo.Collection<JobDocument>;
}
