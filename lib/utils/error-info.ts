/** Message and class of anything a handler threw, readable even for non-Errors (`throw 'x'`, `throw undefined`). */
export function errorInfo(thrown: unknown): { message: string; errorClass: string } {
  if (thrown instanceof Error) {
    return { message: thrown.message || thrown.name, errorClass: thrown.name || thrown.constructor?.name || 'Error' };
  }
  if (thrown === undefined || thrown === null) {
    return { message: `Handler threw ${String(thrown)} instead of an Error`, errorClass: 'NonError' };
  }
  if (typeof thrown === 'string') return { message: thrown, errorClass: 'NonError' };
  let rendered: string;
  try {
    rendered = JSON.stringify(thrown) ?? String(thrown);
  } catch {
    rendered = Object.prototype.toString.call(thrown);
  }
  return { message: `Handler threw a non-Error: ${rendered.slice(0, 500)}`, errorClass: 'NonError' };
}
