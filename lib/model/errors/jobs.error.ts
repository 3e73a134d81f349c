/** Base class of every error this library throws; `name` is the concrete class name. */
export class JobsError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}
