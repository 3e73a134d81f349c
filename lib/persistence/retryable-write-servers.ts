import { mongo } from 'mongoose';

/**
 * Which servers take retryable writes, as this process's clients have seen them. A `directConnection` to a
 * replica-set primary is a `Single` topology to the driver, yet its writes are retryable: a write whose first attempt
 * failed on the network is sent again after a new server selection, and when that selection fails the driver throws
 * the selection error (see `mayHaveLanded`). By then the server's description is `Unknown`, so only what it was before
 * tells that case from a standalone server's, where a selection error means nothing was sent.
 */

/** Server types a write may be retried on: a replica-set primary, a router, a load balancer. */
const RETRYABLE_TYPES: ReadonlySet<string> = new Set([
  mongo.ServerType.RSPrimary,
  mongo.ServerType.Mongos,
  mongo.ServerType.LoadBalancer,
]);

/** Addresses (`host:port`) last described as one of those; one later described as a standalone leaves the set. */
const retryableAddresses = new Set<string>();
const watched = new WeakSet<object>();

/** The part of a `MongoClient` read here: its current description and its monitoring events. */
export interface MonitoredClient {
  readonly topology?: { readonly description?: { readonly servers?: ReadonlyMap<string, { type: string }> } };
  on(event: 'serverDescriptionChanged', listener: (event: mongo.ServerDescriptionChangedEvent) => void): unknown;
}

/** Learns, from now on, what the client's monitoring says of each server (once per client; what it knows already too). */
export function watchRetryableWriteServers(client: MonitoredClient): void {
  if (watched.has(client)) return;
  watched.add(client);
  for (const [address, server] of client.topology?.description?.servers ?? []) note(address, server.type);
  client.on('serverDescriptionChanged', (event) => note(event.address, event.newDescription.type));
}

/** Whether one of these addresses was last seen (before going `Unknown`, say) taking retryable writes. */
export function tookRetryableWrites(addresses: Iterable<string>): boolean {
  for (const address of addresses) if (retryableAddresses.has(address)) return true;
  return false;
}

function note(address: string, type: string): void {
  if (RETRYABLE_TYPES.has(type)) retryableAddresses.add(address);
  else if (type === mongo.ServerType.Standalone) retryableAddresses.delete(address);
}
