// The import-rules check (`npm run lint:imports`; `npm test` runs it in test/architecture/import-rules.spec.ts):
// dependency-cruiser cruises lib/ with the rules of .dependency-cruiser.cjs, and the violations that existed when the
// check came in, listed in .dependency-cruiser-known-violations.json (written by `depcruise-baseline`), are ignored.
// It fails on a violation not in that list, and on a listed one that no longer occurs (the list only shrinks: a fixed
// violation leaves it in the same change).
//
// This wrapper exists for one gap in dependency-cruiser (17.x, and its main branch as of this writing): it writes
// folder-scope violations (the `no-folder-cycle` rule) into the baseline but never ignores them, so they are matched
// here by rule and folder pair. Everything else is dependency-cruiser's own doing: `ignore` severity on a known
// violation is its --ignore-known.
//
// Usage: node scripts/check-imports.mjs [--json] [--prune]   (run from the repository root, or a copy of it)
//   --json   prints the report as JSON on stdout (the human-readable one goes to stderr);
//   --prune  removes the known violations that no longer occur from the list, and adds none (`npm run
//            lint:imports:prune`; `npm run lint:imports:baseline` rewrites the whole list, for when files move).
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { cruise } from 'dependency-cruiser';
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';

const CONFIG_FILE = '.dependency-cruiser.cjs';
const KNOWN_VIOLATIONS_FILE = '.dependency-cruiser-known-violations.json';
const CRUISED = ['lib'];

/**
 * What identifies a violation from one run to the next. A file cycle is reported once, from whichever of its edges
 * dependency-cruiser meets first: its files identify it (as they do for dependency-cruiser's own --ignore-known). A
 * folder cycle is reported once per folder arrow on it, with an example path that other arrows can change: the arrow
 * identifies it. Anything else is its rule and its two ends.
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

async function checkImports({ prune }) {
  const started = performance.now();
  const known = existsSync(KNOWN_VIOLATIONS_FILE) ? JSON.parse(readFileSync(KNOWN_VIOLATIONS_FILE, 'utf8')) : [];
  const options = await extractDepcruiseOptions(`./${CONFIG_FILE}`);
  const tsConfig = extractTSConfig(options.tsConfig?.fileName ?? 'tsconfig.json');
  const { output } = await cruise(
    CRUISED,
    { ...options, knownViolations: known, outputType: 'json' },
    {},
    { tsConfig },
  );
  const { summary } = typeof output === 'string' ? JSON.parse(output) : output;

  const folderRules = new Set(
    options.ruleSet.forbidden.filter((rule) => rule.scope === 'folder').map((rule) => rule.name),
  );
  const keyOf = (violation) => identify(violation, folderRules);
  const knownKeys = new Set(known.map(keyOf));
  // `ignore`: dependency-cruiser matched it to a known violation; the key match covers the folder rules it does not.
  const isIgnored = (violation) => violation.rule.severity === 'ignore' || knownKeys.has(keyOf(violation));
  const occurring = new Set(summary.violations.map(keyOf));
  // File-level violations first: one upward arrow can put a dozen folder arrows on a cycle, listed after it.
  const newViolations = summary.violations
    .filter((violation) => !isIgnored(violation))
    .sort((a, b) => Number(folderRules.has(a.rule.name)) - Number(folderRules.has(b.rule.name)));
  const fixedButListed = known.filter((violation) => !occurring.has(keyOf(violation)));

  const stillOccurring = known.filter((violation) => occurring.has(keyOf(violation)));
  if (prune && fixedButListed.length > 0) {
    // The layout depcruise-baseline writes, so that either tool leaves a diff of only the lines that changed.
    writeFileSync(KNOWN_VIOLATIONS_FILE, `${JSON.stringify(stillOccurring, null, 2)}\n`);
  }

  return {
    ok: newViolations.length === 0 && (prune || fixedButListed.length === 0),
    pruned: prune ? fixedButListed.length : 0,
    newViolations: newViolations.map(describe),
    fixedButListed: fixedButListed.map(describe),
    knownByRule: countByRule(prune ? stillOccurring : known),
    allByRule: countByRule(summary.violations),
    modulesCruised: summary.totalCruised,
    dependenciesCruised: summary.totalDependenciesCruised,
    seconds: Number(((performance.now() - started) / 1000).toFixed(2)),
  };
}

function print(report) {
  const lines = [];
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

const report = await checkImports({ prune: process.argv.includes('--prune') });
print(report);
if (process.argv.includes('--json')) console.log(JSON.stringify(report, null, 2));
process.exitCode = report.ok ? 0 : 1;
