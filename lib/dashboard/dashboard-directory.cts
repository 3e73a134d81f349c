// How the dashboard finds its page in both builds. A `.cts` file compiles to CommonJS (`.cjs`) whatever the build's
// module format, and ES modules may import CommonJS, so this one file gives `__dirname` to the CommonJS build
// (dist/dashboard/), the ES module build (dist/esm/dashboard/) and jest (lib/dashboard/) alike. The alternatives
// need two copies of a file and a build step that picks one (`import.meta.dirname` cannot even compile into CommonJS
// output), or a generated module embedding the page, to regenerate on every edit of it.

/** The directory this module runs from. */
export const dashboardDirectory: string = __dirname;
