/**
 * Import rules for lib/, checked by dependency-cruiser (`npm run lint:imports`, and in `npm test` by
 * test/architecture/import-rules.spec.ts): no cycles between files, no cycles between folders, and no arrow from a
 * floor to a higher one. .dependency-cruiser-known-violations.json lists the violations the check ignores: it is empty
 * since the renovation of issue 29 and stays so (see CONTRIBUTING.md, "Import rules").
 */

/**
 * The floors of lib/, bottom first, following the data flow: a job is described (model), stored (persistence),
 * matched to a handler (handlers), enqueued, claimed, leased, executed, driven by a worker, administered and swept;
 * side rooms read or feed that pipeline; the facade and the Nest module assemble it; the subpath entry points
 * (`./dashboard`, `./health`, `./testing`) sit on top of the public API. A file may import its own floor and the
 * floors below it, never a floor above.
 *
 * `folders` are folders under lib/ (with their subfolders), `files` the loose files at lib/'s root. Each floor below the
 * side rooms is one folder; a new folder goes on a floor here, and every lib/ file must be on one (rules
 * `not-on-a-floor` and `to-a-file-not-on-a-floor`).
 */
const floors = [
  {
    name: 'model',
    comment: 'the job document and record, option and context types, constants, errors, events, pure helpers',
    folders: ['model'],
  },
  { name: 'persistence', comment: 'the only room that talks to MongoDB', folders: ['persistence'] },
  {
    name: 'handlers',
    comment: '@JobHandler, the registry, and what a handler declares: limits, retention, cron',
    folders: ['handlers'],
  },
  { name: 'enqueue', folders: ['enqueue'] },
  { name: 'claim', comment: 'fleet limits are part of claiming', folders: ['claim'] },
  { name: 'lease', folders: ['lease'] },
  { name: 'execution', comment: 'one attempt', folders: ['execution'] },
  {
    name: 'worker',
    comment: 'the poll loop and its slots, runNow, shutdown, drain and waits on the running worker',
    folders: ['worker'],
  },
  { name: 'admin', comment: 'cancel, retry, purge, and the retention sweeper', folders: ['admin'] },
  {
    name: 'side-rooms',
    comment: 'cron, telemetry, read queries, fleet presence, liveness, HTTP helpers',
    folders: ['schedule', 'telemetry', 'query', 'fleet', 'liveness', 'http'],
  },
  {
    name: 'module',
    comment: 'the facade, the Nest module and the root export',
    files: ['jobs.service.ts', 'jobs.module.ts', 'jobs.module-definition.ts', 'jobs-options.resolver.ts', 'index.ts'],
  },
  { name: 'entry-points', comment: 'subpath exports over the public API', folders: ['dashboard', 'health', 'testing'] },
];

const escapeRegExp = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** One regular expression matching every lib/ path on the given floors. */
function pathsOf(someFloors) {
  const alternatives = someFloors.flatMap((floor) => [
    ...(floor.folders ?? []).map((folder) => `^lib/${escapeRegExp(folder)}/`),
    ...(floor.files ?? []).map((file) => `^lib/${escapeRegExp(file)}$`),
  ]);
  return alternatives.join('|');
}

const onAnyFloor = pathsOf(floors);

const noUpwardImports = floors.slice(0, -1).map((floor, index) => ({
  name: `no-upward-from-${floor.name}`,
  severity: 'error',
  comment: `${floor.name} imports only ${floor.name} and the floors below it (${floors
    .slice(0, index)
    .map((below) => below.name)
    .join(', ')})`,
  from: { path: pathsOf([floor]) },
  to: { path: pathsOf(floors.slice(index + 1)) },
}));

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A file must not reach itself through its imports: a cycle has no bottom to read or test it from.',
      from: { path: '^lib/' },
      to: { circular: true },
    },
    {
      name: 'no-folder-cycle',
      severity: 'error',
      comment:
        'No folder reaches itself through the imports of its files. scripts/check-imports.mjs reports every folder ' +
        "arrow on a cycle from dependency-cruiser's folder graph (its own search misses some), with the arrows from a " +
        "folder's files into its subfolders that the graph leaves out. The loose files at " +
        "lib/'s root are in no folder below lib/: the floor rules cover them.",
      scope: 'folder',
      from: { path: '^lib/' },
      to: { circular: true },
    },
    ...noUpwardImports,
    {
      name: 'not-on-a-floor',
      severity: 'error',
      comment: 'Every lib/ file is on a floor (`floors` in .dependency-cruiser.cjs), so the floor rules see it.',
      from: { path: '^lib/', pathNot: onAnyFloor },
      to: {},
    },
    {
      name: 'to-a-file-not-on-a-floor',
      severity: 'error',
      comment: 'Every lib/ file is on a floor (`floors` in .dependency-cruiser.cjs), so the floor rules see it.',
      from: { path: '^lib/' },
      to: { path: '^lib/', pathNot: onAnyFloor },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment: 'An import the cruise cannot resolve is an arrow the rules above cannot see.',
      from: { path: '^lib/' },
      to: { couldNotResolve: true },
    },
  ],
  options: {
    // Type-only imports count: a floor that needs a higher floor's types depends on it all the same.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    doNotFollow: { path: 'node_modules' },
    reporterOptions: { text: { highlightFocused: false } },
  },
};
