// The import-rules check (`npm run lint:imports`; `npm test` runs it in test/architecture/import-rules.spec.ts):
// dependency-cruiser cruises lib/ with the rules of .dependency-cruiser.cjs, and the violations that existed when the
// check came in, listed in .dependency-cruiser-known-violations.json, are ignored. It fails on a violation not in that
// list, and on a listed one that no longer occurs (the list only shrinks: a fixed violation leaves it in the same
// change).
//
// This wrapper exists for two gaps in dependency-cruiser 17's folder-scope cycle rule (`no-folder-cycle`):
// - its search misses folder arrows that do lie on a cycle (in today's lib/, 7 of the 80: it never marks the folder
//   it starts from as visited, rejects a way back through it, and has spent the folders it would need), and which
//   arrows it misses changes as other arrows come and go, so removing one arrow could "add" a violation;
// - it writes folder violations into a baseline but never ignores them (--ignore-known softens files only);
// - its folder graph counts a folder's subfolders as part of it, so an arrow from a folder's own files into one of its
//   subfolders is internal to it and missing: a cycle between lib/model/ and lib/model/errors/ would go unseen. Those
//   arrows are added here from the file graph (withArrowsIntoSubfolders).
// So folder cycles are taken from dependency-cruiser's folder graph here: every arrow between two folders of one
// strongly connected set is on a cycle, and is matched to the list by its two folders. File-level rules are
// dependency-cruiser's own, known ones ignored by its --ignore-known mechanism; the list keeps its baseline format.
//
// Usage: node scripts/check-imports.mjs [--json] [--prune | --write-baseline]   (from the repository root, or a copy)
//   --json            prints the report as JSON on stdout (the human-readable one goes to stderr);
//   --prune           removes the listed violations that no longer occur, and adds none (`npm run lint:imports:prune`);
//   --write-baseline  rewrites the list with every current violation (`npm run lint:imports:baseline`), for when
//                     files move and their violations with them.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { cruise } from 'dependency-cruiser';
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';

const CONFIG_FILE = '.dependency-cruiser.cjs';
const KNOWN_VIOLATIONS_FILE = '.dependency-cruiser-known-violations.json';
const CRUISED = ['lib'];

/**
 * Every arrow between two folders of one strongly connected set (Tarjan's algorithm): exactly the arrows that lie on
 * a folder cycle. Each comes with the shortest way back as its example cycle, in dependency-cruiser's shape.
 */
function folderArrowsOnCycles(folders) {
  const arrows = new Map(folders.map((folder) => [folder.name, folder.dependencies.map(({ name }) => name)]));
  const component = new Map();
  const index = new Map();
  const lowest = new Map();
  const stack = [];
  const visit = (name) => {
    index.set(name, index.size);
    lowest.set(name, index.get(name));
    stack.push(name);
    for (const next of arrows.get(name) ?? []) {
      if (!index.has(next)) {
        visit(next);
        lowest.set(name, Math.min(lowest.get(name), lowest.get(next)));
      } else if (!component.has(next)) {
        lowest.set(name, Math.min(lowest.get(name), index.get(next)));
      }
    }
    if (lowest.get(name) === index.get(name)) {
      let member;
      do {
        member = stack.pop();
        component.set(member, name);
      } while (member !== name);
    }
  };
  for (const name of arrows.keys()) if (!index.has(name)) visit(name);

  const wayBack = (from, to) => {
    const cameFrom = new Map([[to, null]]);
    const queue = [to];
    while (!cameFrom.has(from)) {
      const name = queue.shift();
      if (name === undefined) throw new Error(`no way back from ${to} to ${from} in their strongly connected set`);
      for (const next of arrows.get(name) ?? []) {
        if (component.get(next) === component.get(from) && !cameFrom.has(next)) {
          cameFrom.set(next, name);
          queue.push(next);
        }
      }
    }
    const path = [];
    for (let name = from; name !== null; name = cameFrom.get(name)) path.unshift(name);
    return path.map((name) => ({ name, dependencyTypes: [] }));
  };

  return [...arrows].flatMap(([from, targets]) =>
    targets
      .filter((to) => to !== from && component.get(to) === component.get(from))
      .map((to) => ({ from, to, cycle: wayBack(from, to) })),
  );
}

/**
 * dependency-cruiser's folder graph plus the arrows it leaves out: from a folder's own files into its subfolders (it
 * counts a subfolder's files as the folder's, so such an arrow is internal to the folder). Its arrows the other way,
 * from a subfolder up to its parent, are there already; with both, a folder and its subfolder in a cycle show.
 */
function withArrowsIntoSubfolders(folders, modules) {
  const arrows = new Map(folders.map((folder) => [folder.name, new Set(folder.dependencies.map(({ name }) => name))]));
  const folderOf = (path) => path.slice(0, path.lastIndexOf('/'));
  for (const module of modules) {
    const from = folderOf(module.source);
    for (const dependency of module.dependencies) {
      const to = folderOf(dependency.resolved);
      if (to.startsWith(`${from}/`) && arrows.has(from)) arrows.get(from).add(to);
    }
  }
  return [...arrows].map(([name, targets]) => ({
    name,
    dependencies: [...targets].map((target) => ({ name: target })),
  }));
}

/** The folder-cycle violations of the rule set's folder-scope `circular` rules, from the cruise's folder graph. */
function folderCycleViolations(ruleSet, folders) {
  const rules = (ruleSet.forbidden ?? []).filter((rule) => rule.scope === 'folder');
  for (const rule of rules) {
    const understood = rule.to?.circular === true && Object.keys(rule.to).length === 1;
    if (!understood) throw new Error(`${CONFIG_FILE}: rule ${rule.name}: only folder rules of to: { circular: true }`);
  }
  const arrows = rules.length > 0 ? folderArrowsOnCycles(folders ?? []) : [];
  return rules.flatMap((rule) =>
    arrows
      .filter(({ from }) => rule.from?.path === undefined || new RegExp(rule.from.path).test(from))
      .map(({ from, to, cycle }) => ({
        type: 'cycle',
        from,
        to,
        rule: { severity: rule.severity ?? 'warn', name: rule.name },
        cycle,
      })),
  );
}

/**
 * What identifies a violation from one run to the next. A file cycle is reported once, from whichever of its edges
 * dependency-cruiser meets first: its files identify it (as they do for dependency-cruiser's --ignore-known). A
 * folder cycle is reported per arrow on it: the arrow identifies it. Anything else is its rule and its two ends.
 */
function identify(violation, folderRules) {
  if (violation.cycle?.length && !folderRules.has(violation.rule.name)) {
    const files = violation.cycle.map((step) => step.name).sort();
    return `${violation.rule.name}: ${files.join(' ⟲ ')}`;
  }
  return `${violation.rule.name}: ${violation.from} → ${violation.to}`;
}

function describe(violation) {
  const ends = `${violation.rule.name}: ${violation.from} → ${violation.to}`;
  if (!violation.cycle?.length) return ends;
  return `${ends} (cycle: ${[violation.from, ...violation.cycle.map((step) => step.name)].join(' → ')})`;
}

function countByRule(violations) {
  const counts = {};
  for (const violation of violations) counts[violation.rule.name] = (counts[violation.rule.name] ?? 0) + 1;
  return Object.fromEntries(Object.entries(counts).sort(([a], [b]) => a.localeCompare(b)));
}

function writeKnownViolations(violations) {
  // The layout depcruise-baseline writes, so that a rewrite shows as a diff of the entries that changed.
  writeFileSync(KNOWN_VIOLATIONS_FILE, `${JSON.stringify(violations, null, 2)}\n`);
}

async function checkImports({ prune, writeBaseline }) {
  const started = performance.now();
  const listed = existsSync(KNOWN_VIOLATIONS_FILE) ? JSON.parse(readFileSync(KNOWN_VIOLATIONS_FILE, 'utf8')) : [];
  const known = writeBaseline ? [] : listed;
  const options = await extractDepcruiseOptions(`./${CONFIG_FILE}`);
  const tsConfig = extractTSConfig(options.tsConfig?.fileName ?? 'tsconfig.json');
  const { output } = await cruise(
    CRUISED,
    { ...options, knownViolations: known, outputType: 'json' },
    {},
    { tsConfig },
  );
  const { summary, folders, modules } = typeof output === 'string' ? JSON.parse(output) : output;

  const folderRules = new Set(
    (options.ruleSet.forbidden ?? []).filter((rule) => rule.scope === 'folder').map((rule) => rule.name),
  );
  const violations = [
    ...summary.violations.filter((violation) => !folderRules.has(violation.rule.name)),
    ...folderCycleViolations(options.ruleSet, withArrowsIntoSubfolders(folders ?? [], modules ?? [])),
  ];
  if (writeBaseline) writeKnownViolations(violations);

  const keyOf = (violation) => identify(violation, folderRules);
  const knownKeys = new Set(known.map(keyOf));
  // `ignore`: dependency-cruiser matched it to a known violation; the key match covers the folder rules too.
  const isIgnored = (violation) => violation.rule.severity === 'ignore' || knownKeys.has(keyOf(violation));
  const occurring = new Set(violations.map(keyOf));
  // File-level violations first: one upward arrow can put a dozen folder arrows on a cycle, listed after it.
  const newViolations = violations
    .filter((violation) => !isIgnored(violation))
    .sort((a, b) => Number(folderRules.has(a.rule.name)) - Number(folderRules.has(b.rule.name)));
  const fixedButListed = known.filter((violation) => !occurring.has(keyOf(violation)));
  const stillOccurring = known.filter((violation) => occurring.has(keyOf(violation)));
  if (prune && fixedButListed.length > 0) writeKnownViolations(stillOccurring);

  return {
    ok: writeBaseline || (newViolations.length === 0 && (prune || fixedButListed.length === 0)),
    newViolations: writeBaseline ? [] : newViolations.map(describe),
    fixedButListed: fixedButListed.map(describe),
    pruned: prune ? fixedButListed.length : 0,
    knownByRule: countByRule(writeBaseline ? violations : prune ? stillOccurring : known),
    allByRule: countByRule(violations),
    modulesCruised: summary.totalCruised,
    dependenciesCruised: summary.totalDependenciesCruised,
    seconds: Number(((performance.now() - started) / 1000).toFixed(2)),
  };
}

function print(report, { writeBaseline }) {
  const lines = [];
  if (writeBaseline) lines.push(`Wrote every current violation to ${KNOWN_VIOLATIONS_FILE}.`);
  if (report.newViolations.length > 0) {
    lines.push(`${report.newViolations.length} new import-rule violation(s) (rules: ${CONFIG_FILE}):`);
    lines.push(...report.newViolations.map((line) => `  ${line}`));
  }
  if (report.pruned > 0) {
    lines.push(`Removed ${report.pruned} violation(s) that no longer occur from ${KNOWN_VIOLATIONS_FILE}:`);
    lines.push(...report.fixedButListed.map((line) => `  ${line}`));
  } else if (report.fixedButListed.length > 0) {
    lines.push(
      `${report.fixedButListed.length} violation(s) in ${KNOWN_VIOLATIONS_FILE} no longer occur: remove them from it ` +
        '(`npm run lint:imports:prune`; the list only shrinks):',
    );
    lines.push(...report.fixedButListed.map((line) => `  ${line}`));
  }
  const known = Object.entries(report.knownByRule).map(([rule, count]) => `${rule} ${count}`);
  lines.push(
    `${report.ok ? 'Import rules hold' : 'Import rules broken'}: ${report.modulesCruised} modules, ` +
      `${report.dependenciesCruised} dependencies in ${report.seconds} s; known violations left: ` +
      `${known.length > 0 ? known.join(', ') : 'none'}.`,
  );
  console.error(lines.join('\n'));
}

const modes = { prune: process.argv.includes('--prune'), writeBaseline: process.argv.includes('--write-baseline') };
const report = await checkImports(modes);
print(report, modes);
if (process.argv.includes('--json')) console.log(JSON.stringify(report, null, 2));
process.exitCode = report.ok ? 0 : 1;
