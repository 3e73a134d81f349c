/**
 * A name was paused or resumed, as this process learnt it (`JobsService.pauses$`): at once for its own
 * `pause`/`resume` calls, and within one poll interval for a call made elsewhere when this process runs a worker.
 */
export interface NamePauseEvent {
  type: 'paused' | 'resumed';
  name: string;
  /** When this process learnt it. */
  at: Date;
}

/** A paused name and since when (`JobsService.pausedNames`). */
export interface PausedName {
  name: string;
  pausedAt: Date;
}
