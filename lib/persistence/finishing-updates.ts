import type { mongo } from 'mongoose';
import type { JobDocument } from '../model/job-document.js';
import { RELEASED_FIELDS } from './row-fields.js';

/** Updates that end a run, shared by the claim (set aside), outcome and admin stores. */

/** A row that cannot run as stored: failed, with the reason, its lease and dedupe scope released. */
export function failedUpdate(reason: string, now: Date, expiresAt?: Date): mongo.UpdateFilter<JobDocument> {
  return {
    $set: { status: 'failed', lastError: reason, finishedAt: now, updatedAt: now, ...expiry(expiresAt) },
    $unset: RELEASED_FIELDS,
  };
}

/** The `$set` part of a finishing write's retention stamp. */
export function expiry(expiresAt?: Date): { expiresAt?: Date } {
  return expiresAt === undefined ? {} : { expiresAt };
}
