/**
 * A job row as a worker leaves it, for fixtures written straight into the collection (any size and status in one
 * insert, no handler run): `completed` a moment ago unless `fields` say otherwise.
 */
export function storedJobRow(fields: Record<string, unknown>): Record<string, unknown> {
  const at = new Date();
  return {
    payload: null,
    status: 'completed',
    runAt: at,
    priority: 0,
    attemptCount: 0,
    maxAttempts: 5,
    attempts: [],
    fencingToken: 1,
    createdAt: at,
    updatedAt: at,
    finishedAt: at,
    ...fields,
  };
}
