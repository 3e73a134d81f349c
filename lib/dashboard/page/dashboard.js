// The jobs dashboard page: vanilla JavaScript, no build step, no dependency. It reads and writes the filters in the
// URL's query string (shareable), talks to `api/` relative to the page, and refreshes in place every few seconds.

const STATUSES = ['pending', 'running', 'completed', 'failed', 'dead', 'cancelled'];
const FILTERS = ['status', 'name', 'search'];
const REFRESH_MS = 3000;
const PAGE_SIZE = 50;
/** The API's largest page: a refresh re-reads the rows already loaded in pages of this size. */
const MAX_PAGE = 200;
const readOnly = document.body.dataset.readOnly === 'true';
/** The ids the library runs; any other `_id` is a row it set aside. */
const OBJECT_ID = /^[0-9a-f]{24}$/i;

/** What the page shows, kept between refreshes so a refresh does not lose the user's place. */
const state = { jobs: [], nextCursor: null, openId: null, timer: null, metrics: null };

const $ = (id) => document.getElementById(id);

function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'onclick') node.addEventListener('click', value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children) node.append(child ?? '');
  return node;
}

/** A value cut with an ellipsis past the cell's width (CSS), the whole of it in the tooltip. */
function clip(text) {
  return el('span', { class: 'clip', title: text }, text);
}

/** The page's URL with these query keys changed: what a link to a view or a job points at. */
function viewHref(changes) {
  const params = new URLSearchParams(location.search);
  for (const [key, value] of Object.entries(changes)) {
    if (value) params.set(key, value);
    else params.delete(key);
  }
  const query = params.toString();
  return `${location.pathname}${query ? `?${query}` : ''}`;
}

/**
 * A link that opens its view in place on a plain click and, being a real link, in a new tab on a middle click,
 * Ctrl/Cmd+click or "Open in new tab".
 */
function viewLink(changes, attributes, children, onOpen) {
  const open = (event) => {
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    onOpen();
  };
  return el('a', { ...attributes, href: viewHref(changes), onclick: open }, ...children);
}

function formatDate(value) {
  return value ? new Date(value).toLocaleString() : '—';
}

function formatAge(ms) {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.round(ms / 60_000)} min`;
}

function statusBadge(status) {
  return el('span', { class: `status status-${status}` }, status);
}

/** The filters as in the URL. */
function currentFilters() {
  const params = new URLSearchParams(location.search);
  return Object.fromEntries(FILTERS.map((key) => [key, params.get(key) ?? '']));
}

function setUrl(changes) {
  history.pushState(null, '', viewHref(changes));
}

async function api(method, path, body) {
  const init = { method, headers: { accept: 'application/json' }, credentials: 'same-origin' };
  if (method === 'POST') {
    init.headers['content-type'] = 'application/json';
    init.headers['x-jobs-dashboard'] = '1';
    init.body = JSON.stringify(body ?? {});
  }
  const response = await fetch(`api/${path}`, init);
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = new Error(answer.message ?? `${response.status} ${response.statusText}`);
    error.answer = answer;
    throw error;
  }
  return answer;
}

/** Re-renders a tbody (or any container), keeping focus on the same control when it still exists. */
function replaceChildrenKeepingFocus(parent, children) {
  const focused = parent.contains(document.activeElement) ? document.activeElement.dataset.key : undefined;
  parent.replaceChildren(...children);
  if (focused) parent.querySelector(`[data-key="${CSS.escape(focused)}"]`)?.focus();
}

function renderCounts(metrics) {
  const head = el('tr', {}, el('th', { scope: 'col' }, 'Name'));
  for (const status of STATUSES) head.append(el('th', { scope: 'col', class: 'num' }, status));
  head.append(el('th', { scope: 'col', class: 'num' }, 'Oldest waiting'));
  head.append(el('th', { scope: 'col' }, 'Claimed'));
  $('counts').tHead.replaceChildren(head);
  // A paused name with no row is listed too: it can be resumed from here.
  const counted = new Set(metrics.names.map((entry) => entry.name));
  const pausedOnly = (metrics.paused ?? [])
    .filter((name) => !counted.has(name))
    .map((name) => ({ name, counts: {}, oldestPendingAgeMs: null, paused: true }));
  const rows = [...metrics.names, ...pausedOnly].map((entry) => {
    const row = el('tr', {}, el('th', { scope: 'row' }, clip(entry.name)));
    for (const status of STATUSES) {
      const count = entry.counts[status];
      const filter = () => applyFilters({ name: entry.name, status, search: '' });
      const cell = count
        ? el('button', { class: 'link', 'data-key': `${entry.name}/${status}`, onclick: filter }, String(count))
        : '0';
      row.append(el('td', { class: 'num' }, cell));
    }
    row.append(el('td', { class: 'num' }, formatAge(entry.oldestPendingAgeMs)));
    row.append(el('td', {}, ...pauseControl(entry)));
    return row;
  });
  if (rows.length === 0) rows.push(el('tr', {}, el('td', { colspan: STATUSES.length + 3 }, 'No jobs yet.')));
  replaceChildrenKeepingFocus($('counts').tBodies[0], rows);
}

/** Whether workers claim the name (`paused`: nobody does), and unless readOnly the button that changes it. */
function pauseControl(entry) {
  const badge = entry.paused
    ? el('span', { class: 'status status-paused' }, 'paused')
    : el('span', { class: 'status status-claimed' }, 'yes');
  if (readOnly) return [badge];
  const action = entry.paused ? 'resume' : 'pause';
  const label = entry.paused ? 'Resume' : 'Pause';
  const button = el(
    'button',
    {
      'data-key': `${entry.name}/${action}`,
      title: `${label} ${entry.name}`,
      onclick: () => setPaused(entry.name, action),
    },
    label,
  );
  return [badge, ' ', button];
}

/** Pauses (after a confirmation) or resumes a name fleet-wide, then shows the counts again. */
async function setPaused(name, action) {
  const question =
    `Pause "${name}" on every worker? Running jobs finish; no job of it starts (nor is reclaimed) until it is ` +
    'resumed; enqueues still store jobs.';
  if (action === 'pause' && !confirm(question)) return;
  try {
    await api('POST', action, { name });
    $('updated').textContent = action === 'pause' ? `Paused ${name}.` : `Resumed ${name}.`;
  } catch (error) {
    $('updated').textContent = `${action === 'pause' ? 'Pausing' : 'Resuming'} ${name} failed: ${error.message}`;
    return;
  }
  await api('GET', 'metrics').then(renderMetrics, () => undefined);
}

const SVG = 'http://www.w3.org/2000/svg';
/** Stacked bottom-up in this order; the colours come from the stylesheet (light and dark). */
const SERIES = ['completed', 'failed', 'dead'];
const CHART = { width: 600, height: 120 };

function svg(tag, attributes, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value));
  node.append(...children);
  return node;
}

/** A stacked bar per bucket as inline SVG (no library); the caption and aria-label carry the totals as text. */
function renderThroughput(metrics) {
  // The whole queue: the answer's total series (it charts only a few names on its own).
  const buckets = metrics.total;
  const totals = Object.fromEntries(SERIES.map((status) => [status, 0]));
  for (const bucket of buckets) for (const status of SERIES) totals[status] += bucket[status];
  const summary =
    `Last ${formatAge(metrics.windowMs)} in ${formatAge(metrics.bucketMs)} buckets: ` +
    `${totals.completed} completed, ${totals.failed} failed, ${totals.dead} dead`;
  const peak = Math.max(1, ...buckets.map((bucket) => bucket.completed + bucket.failed + bucket.dead));
  const width = CHART.width / Math.max(1, buckets.length);
  const bars = buckets.map((bucket, index) => {
    let y = CHART.height;
    const rects = SERIES.map((status) => {
      const height = (bucket[status] / peak) * CHART.height;
      y -= height;
      return svg('rect', {
        class: `bar-${status}`,
        'data-status': status,
        'data-count': bucket[status],
        x: index * width,
        y,
        width: Math.max(1, width - 1),
        height,
      });
    });
    const label = `${formatDate(bucket.start)}: ${SERIES.map((status) => `${bucket[status]} ${status}`).join(', ')}`;
    const current = index === buckets.length - 1;
    return svg('g', { 'data-start': bucket.start, 'data-current': current }, svg('title', {}, label), ...rects);
  });
  const chart = $('throughput').querySelector('svg');
  chart.setAttribute('aria-label', summary);
  chart.replaceChildren(...bars);
  renderAxes(buckets, peak, metrics.bucketMs);
  $('throughput').querySelector('figcaption').textContent = summary;
}

function formatTime(value) {
  return new Date(value).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
}

/** HTML around the SVG (whose text would stretch with it): counts from 0 to the peak, bucket starts oldest to now. */
function renderAxes(buckets, peak, bucketMs) {
  $('axis-y').replaceChildren(
    el('span', { class: 'tick' }, String(peak)),
    el('span', { class: 'axis-title' }, `Jobs per ${formatAge(bucketMs)}`),
    el('span', { class: 'tick' }, '0'),
  );
  const ticks = [buckets[0], buckets[Math.floor(buckets.length / 2)], buckets.at(-1)].filter(Boolean);
  const times = [...new Set(ticks)].map((bucket) =>
    el('time', { class: 'tick', datetime: bucket.start }, formatTime(bucket.start)),
  );
  $('axis-x').replaceChildren(...times, el('span', { class: 'axis-title' }, 'Time'));
}

function renderMetrics(metrics) {
  state.metrics = metrics;
  renderCounts(metrics);
  if (!readOnly) renderBulkNames(metrics);
  renderThroughput(metrics);
  renderStatusTabs();
}

/**
 * A tab per status with its count (all names, or the name filtered on; the id search is not counted), as links so a
 * tab opens in a new tab too (without the open job; a plain click keeps it open). The counts come with the metrics,
 * which already count every name by status.
 */
function renderStatusTabs() {
  if (!state.metrics) return;
  const { name, status: current } = currentFilters();
  const counts = Object.fromEntries(STATUSES.map((status) => [status, 0]));
  for (const entry of state.metrics.names) {
    if (name && entry.name !== name) continue;
    for (const status of STATUSES) counts[status] += entry.counts[status] ?? 0;
  }
  const all = STATUSES.reduce((sum, status) => sum + counts[status], 0);
  const tabs = [['', 'All', all], ...STATUSES.map((status) => [status, status, counts[status]])].map(
    ([status, label, count]) =>
      viewLink(
        { status, job: '' },
        { 'data-status': status, 'data-key': `tab/${status}`, 'aria-current': status === current ? 'page' : undefined },
        [label, ' ', el('span', { class: 'count' }, String(count))],
        () => applyFilters({ status }),
      ),
  );
  replaceChildrenKeepingFocus($('status-tabs'), tabs);
}

/**
 * Runs of the job since it was created or last retried: `attemptCount` counts the runs that ended without success,
 * so a completed job ran once more than that (its success) and a running one is in run `attemptCount + 1`.
 */
function runs(job) {
  return ['completed', 'running'].includes(job.status) ? job.attemptCount + 1 : job.attemptCount;
}

/** The runs in words, for the panel and the Runs cell's tooltip. */
function runsText(job) {
  const count = runs(job);
  if (job.status === 'completed') return `Succeeded on run ${count} of at most ${job.maxAttempts}`;
  if (job.status === 'running') return `Run ${count} of at most ${job.maxAttempts} in progress`;
  return `${count} failed run${count === 1 ? '' : 's'} of at most ${job.maxAttempts}`;
}

function jobRow(job) {
  const link = viewLink(
    { job: job.id },
    { class: 'clip id', 'data-key': job.id, title: job.id, 'aria-label': `Open job ${job.id}` },
    [job.id],
    () => openJob(job.id, true),
  );
  return el(
    'tr',
    { 'data-id': job.id, 'aria-current': job.id === state.openId ? 'true' : undefined },
    el('td', {}, link),
    el('td', {}, clip(job.name)),
    el('td', {}, statusBadge(job.status), job.status === 'running' ? progressBar(job.progress) : null),
    el('td', { class: 'num', title: runsText(job) }, `${runs(job)}/${job.maxAttempts}`),
    el('td', {}, formatDate(job.createdAt)),
  );
}

function renderJobs() {
  const rows = state.jobs.map(jobRow);
  if (rows.length === 0) rows.push(el('tr', {}, el('td', { colspan: 5 }, 'No job matches these filters.')));
  replaceChildrenKeepingFocus($('jobs').tBodies[0], rows);
  $('more').hidden = state.nextCursor === null;
}

function listQuery(limit, cursor) {
  const params = new URLSearchParams({ limit: String(limit) });
  for (const [key, value] of Object.entries(currentFilters())) if (value) params.set(key, value);
  if (cursor) params.set('cursor', cursor);
  return `jobs?${params}`;
}

/**
 * The list again from the top, as many rows as are shown (in pages of the API's 200 at most), so the rows loaded with
 * "Load more" stay and the scroll position holds.
 */
async function refreshJobs() {
  const wanted = Math.max(PAGE_SIZE, state.jobs.length);
  try {
    let jobs = [];
    let cursor = null;
    do {
      const page = await api('GET', listQuery(Math.min(MAX_PAGE, wanted - jobs.length), cursor));
      jobs = jobs.concat(page.jobs);
      cursor = page.nextCursor;
    } while (cursor !== null && jobs.length < wanted);
    state.jobs = jobs;
    state.nextCursor = cursor;
    $('list-error').hidden = true;
  } catch (error) {
    state.jobs = [];
    state.nextCursor = null;
    $('list-error').textContent = error.message;
    $('list-error').hidden = false;
  }
  renderJobs();
}

async function loadMore() {
  const page = await api('GET', listQuery(PAGE_SIZE, state.nextCursor));
  const first = page.jobs[0];
  state.jobs = state.jobs.concat(page.jobs);
  state.nextCursor = page.nextCursor;
  const hadFocus = document.activeElement === $('more');
  renderJobs();
  // The button hides on the last page: focus moves on to the first row it loaded rather than to the page's body.
  if (hadFocus && $('more').hidden && first) {
    $('jobs')
      .tBodies[0].querySelector(`[data-key="${CSS.escape(first.id)}"]`)
      ?.focus();
  }
}

function field(name, value) {
  return [el('dt', {}, name), el('dd', {}, value)];
}

function json(value) {
  return el('pre', {}, JSON.stringify(value, null, 2));
}

/**
 * A job's progress as a bar, when it reads as one: a number (a percentage, 0 to 100) or `{ done, total }` with
 * finite numbers and a positive total. Anything else is shown as JSON only.
 */
function progressBar(progress) {
  let value;
  let max;
  let text;
  if (typeof progress === 'number' && Number.isFinite(progress)) {
    value = Math.min(100, Math.max(0, progress));
    max = 100;
    text = `${Math.round(value)}%`;
  } else if (
    progress !== null &&
    typeof progress === 'object' &&
    Number.isFinite(progress.done) &&
    Number.isFinite(progress.total) &&
    progress.total > 0
  ) {
    max = progress.total;
    value = Math.min(max, Math.max(0, progress.done));
    text = `${progress.done} of ${progress.total}`;
  } else {
    return null;
  }
  return el(
    'span',
    { class: 'progress' },
    el('progress', { value, max, 'aria-label': `Progress: ${text}` }),
    el('span', { class: 'progress-text' }, text),
  );
}

/** The record's lifecycle in time order: created, scheduled run, each failed attempt, last start, finish. */
function timelineEvents(job) {
  const events = [{ event: 'created', at: job.createdAt, text: 'Created' }];
  if (job.runAt && job.runAt !== job.createdAt) events.push({ event: 'scheduled', at: job.runAt, text: 'Due to run' });
  job.attempts.forEach((attempt, index) => {
    const text = `Attempt ${index + 1} failed — ${attempt.errorClass}: ${attempt.error}`;
    events.push({ event: 'attempt', at: attempt.at, text });
  });
  if (job.startedAt) events.push({ event: 'started', at: job.startedAt, text: 'Started' });
  if (job.finishedAt) events.push({ event: 'finished', at: job.finishedAt, text: `Finished: ${job.status}` });
  // A stable sort keeps the order above for equal instants (created before its run, an attempt before the finish).
  return events.sort((a, b) => new Date(a.at) - new Date(b.at));
}

function renderTimeline(job) {
  const items = timelineEvents(job).map(({ event, at, text }) =>
    el('li', { 'data-event': event }, el('time', { datetime: at }, formatDate(at)), ` ${text}`),
  );
  $('panel-timeline').replaceChildren(...items);
}

/** A stack and its cause chain, served only with `showStacks`: as text in a scrollable block, folded by default. */
function stackBlock(stack) {
  return el('details', { class: 'stack' }, el('summary', {}, 'Stack and causes'), el('pre', {}, stack));
}

/** The lines its handlers logged (`ctx.log`), oldest first, each with its time and attempt. */
function renderLogs(job) {
  const logs = job.logs ?? [];
  const list = $('panel-logs');
  const key = `${job.id}\n${logs.length}\n${job.logsTruncated}\n${JSON.stringify(logs.at(-1) ?? null)}`;
  if (list.dataset.key === key) return;
  list.dataset.key = key;
  $('panel-logs-note').hidden = !job.logsTruncated;
  const lines = logs.map((line) =>
    el('li', {}, `${formatDate(line.at)} #${line.attempt} `, el('span', { class: 'log-line' }, line.message)),
  );
  list.replaceChildren(...(lines.length ? lines : [el('li', {}, 'Nothing logged.')]));
}

/**
 * Re-rendered only when the attempts changed (another job, or a new attempt; at most 50 are kept, so the last one's
 * instant is compared too): an auto-refresh must not fold a stack being read or reset its scroll position.
 */
function renderAttempts(job) {
  const list = $('panel-attempts');
  const key = `${job.id}\n${job.attempts.length}\n${job.attempts.at(-1)?.at ?? ''}`;
  if (list.dataset.key === key) return;
  list.dataset.key = key;
  const attempts = job.attempts.map((attempt) =>
    el(
      'li',
      {},
      `${formatDate(attempt.at)} — ${attempt.errorClass}: `,
      el('span', { class: 'error' }, attempt.error),
      attempt.stack ? stackBlock(attempt.stack) : null,
    ),
  );
  list.replaceChildren(...(attempts.length ? attempts : [el('li', {}, 'No failed attempt.')]));
}

function renderPanel(job) {
  renderTimeline(job);
  $('panel-title').textContent = `Job ${job.id}`;
  const fields = [
    ...field('Status', statusBadge(job.status)),
    ...field('Name', job.name),
    ...field('Runs', runsText(job)),
    ...field('Last error', job.lastError ?? '—'),
    ...field(
      'Progress',
      job.progress === null || job.progress === undefined ? '—' : (progressBar(job.progress) ?? json(job.progress)),
    ),
    ...field('Lease holder', job.lockedBy ?? '—'),
    ...field('Lease deadline', formatDate(job.lockedUntil)),
    ...field('Dedupe key', job.dedupeKey ?? '—'),
    ...field('Priority', String(job.priority)),
    ...field('Created', formatDate(job.createdAt)),
    ...field('Run at', formatDate(job.runAt)),
    ...field('Started', formatDate(job.startedAt)),
    ...field('Finished', formatDate(job.finishedAt)),
  ];
  if ('payload' in job) fields.push(...field('Payload', json(job.payload)));
  if ('result' in job) fields.push(...field('Result', json(job.result)));
  $('panel-fields').replaceChildren(...fields);
  renderAttempts(job);
  renderLogs(job);
  // A row whose `_id` is no ObjectId (set aside as failed) can only answer 404 to a retry or cancel.
  const runnable = OBJECT_ID.test(job.id);
  $('retry').hidden = readOnly || !runnable || !['dead', 'failed', 'cancelled'].includes(job.status);
  $('cancel').hidden = readOnly || !runnable || !['pending', 'running'].includes(job.status);
  $('promote').hidden = readOnly || !runnable || job.status !== 'pending' || new Date(job.runAt) <= new Date();
  if (!runnable && !$('panel-message').textContent) {
    $('panel-message').textContent = 'This row’s id is not an ObjectId: the library cannot run, retry or cancel it.';
  }
  $('panel').hidden = false;
  for (const row of $('jobs').tBodies[0].rows) {
    if (row.dataset.id === job.id) row.setAttribute('aria-current', 'true');
    else row.removeAttribute('aria-current');
  }
}

async function openJob(id, focus) {
  if (id !== state.openId) {
    state.openId = id;
    setUrl({ job: id });
    $('panel-message').textContent = '';
  }
  await refreshPanel();
  if (focus) $('panel').focus();
}

async function refreshPanel() {
  if (!state.openId) {
    $('panel').hidden = true;
    return;
  }
  try {
    renderPanel(await api('GET', `jobs/${encodeURIComponent(state.openId)}`));
  } catch (error) {
    $('panel-message').textContent = error.message;
  }
}

function closePanel() {
  const id = state.openId;
  state.openId = null;
  setUrl({ job: '' });
  $('panel').hidden = true;
  $('jobs')
    .querySelector(`[data-key="${CSS.escape(id ?? '')}"]`)
    ?.focus();
}

/** What the panel says after an action went through. */
function actedText(action, job) {
  if (action === 'retry') return 'Retried: the job is pending again.';
  if (action === 'cancel') return 'Cancelled.';
  if (new Date(job.runAt) <= new Date()) return 'Due now: the next claim takes it, in its turn.';
  return `Due at ${formatDate(job.runAt)}: a cancelled run of it may still be settling until then.`;
}

async function act(action) {
  try {
    const job = await api('POST', `jobs/${encodeURIComponent(state.openId)}/${action}`, {});
    $('panel-message').textContent = actedText(action, job);
    renderPanel(job);
  } catch (error) {
    $('panel-message').textContent = error.message;
    if (error.answer?.job) renderPanel(error.answer.job);
  }
  await refreshJobs();
}

/** The names the bulk forms offer (the counted ones), keeping each form's choice across refreshes. */
function renderBulkNames(metrics) {
  const names = metrics.names.map((entry) => entry.name);
  for (const [id, first] of [
    ['bulk-retry-name', []],
    ['bulk-purge-name', [el('option', { value: '' }, 'any name')]],
  ]) {
    const select = $(id);
    const chosen = select.value;
    const options = names.map((name) => el('option', { value: name }, name));
    if (options.every((option, i) => select.options[i + first.length]?.value === option.value)) continue;
    select.replaceChildren(...first, ...options);
    if ([...select.options].some((option) => option.value === chosen)) select.value = chosen;
  }
  renderBulkRetryCount();
}

/** How many jobs "Retry all" would look at now (the counts of the last refresh). */
function bulkRetryCount() {
  const { name, status } = Object.fromEntries(new FormData($('bulk-retry')));
  return state.metrics?.names.find((entry) => entry.name === name)?.counts[status] ?? 0;
}

function renderBulkRetryCount() {
  const count = bulkRetryCount();
  $('bulk-retry-count').textContent = `${count} job${count === 1 ? '' : 's'}`;
}

/**
 * Calls a bounded bulk route again while it says `more` and `goOn` gives the next body (a retry goes on from the
 * `nextCursor` of the call before, so each job is visited once even when the jobs it revived die again meanwhile),
 * reporting the running totals after each call. One bulk action at a time: the forms' buttons are disabled meanwhile.
 */
async function repeatBulk(path, body, goOn, report) {
  const totals = {};
  const buttons = [...document.querySelectorAll('#bulk button')];
  for (const button of buttons) button.disabled = true;
  try {
    for (let next = body; next; ) {
      const answer = await api('POST', path, next);
      for (const [key, value] of Object.entries(answer)) {
        if (typeof value === 'number') totals[key] = (totals[key] ?? 0) + value;
      }
      report(totals, answer.more);
      next = answer.more ? goOn(answer, next) : null;
    }
    return totals;
  } finally {
    for (const button of buttons) button.disabled = false;
  }
}

async function bulkRetry(event) {
  event.preventDefault();
  const { name, status } = Object.fromEntries(new FormData($('bulk-retry')));
  const count = bulkRetryCount();
  if (!name || count === 0) {
    $('bulk-message').textContent = `No ${status} job${name ? ` of ${name}` : ''} to retry.`;
    return;
  }
  if (!confirm(`Retry all ${count} ${status} jobs of "${name}"? Each becomes pending and runs again.`)) return;
  const say = (totals, more) => {
    const done = `Retried ${totals.retried ?? 0} of ${count} ${status} jobs of ${name}`;
    const skipped = totals.skipped ? ` (${totals.skipped} skipped)` : '';
    $('bulk-message').textContent = `${done}${skipped}${more ? '…' : '.'}`;
  };
  say({}, true);
  try {
    const onward = (answer, body) => (answer.nextCursor ? { ...body, cursor: answer.nextCursor } : null);
    await repeatBulk('jobs/retry', { name, status }, onward, say);
  } catch (error) {
    $('bulk-message').textContent = `Retry all stopped: ${error.message}`;
  }
  await refreshAll();
}

async function bulkPurge(event) {
  event.preventDefault();
  const { name, status, age, unit } = Object.fromEntries(new FormData($('bulk-purge')));
  const cutoff = new Date(Date.now() - Number(age) * Number(unit));
  if (!(Number(age) >= 0) || Number.isNaN(cutoff.getTime())) {
    $('bulk-message').textContent =
      'The age must be a number of minutes, hours or days, 0 or more (and not before year 0).';
    return;
  }
  const finishedBefore = cutoff.toISOString();
  const which = `${status} jobs${name ? ` of "${name}"` : ''} finished before ${formatDate(finishedBefore)}`;
  if (!confirm(`Delete all ${which}? This cannot be undone.`)) return;
  const say = (totals, more) => {
    $('bulk-message').textContent = `Deleted ${totals.deleted ?? 0} ${which}${more ? '…' : '.'}`;
  };
  say({}, true);
  const body = { status, finishedBefore, ...(name && { name }) };
  try {
    await repeatBulk('purge', body, (answer, sent) => (answer.deleted > 0 ? sent : null), say);
  } catch (error) {
    $('bulk-message').textContent = `Delete stopped: ${error.message}`;
  }
  await refreshAll();
}

function renderFleet({ workers }) {
  const rows = workers.map((worker) =>
    el(
      'tr',
      { 'data-worker': worker.workerId },
      el('td', {}, clip(worker.workerId)),
      el('td', {}, clip(`${worker.host} / ${worker.pid}`)),
      el('td', {}, clip(worker.names.join(', ') || '—')),
      el('td', { class: 'num' }, `${worker.running}/${worker.concurrency}`),
      el('td', {}, formatDate(worker.lastSeenAt)),
      el('td', {}, clip(worker.version)),
    ),
  );
  if (rows.length === 0) rows.push(el('tr', {}, el('td', { colspan: 6 }, 'No live worker.')));
  replaceChildrenKeepingFocus($('fleet').tBodies[0], rows);
}

async function refreshAll() {
  const results = await Promise.allSettled([
    api('GET', 'metrics').then(renderMetrics),
    refreshJobs(),
    refreshPanel(),
    api('GET', 'workers').then(renderFleet),
  ]);
  const failed = results.find((result) => result.status === 'rejected');
  $('updated').textContent = failed
    ? `Refresh failed: ${failed.reason.message}`
    : `Updated ${new Date().toLocaleTimeString()}`;
}

function schedule() {
  clearTimeout(state.timer);
  if ($('auto-refresh').checked) {
    state.timer = setTimeout(async () => {
      await refreshAll();
      schedule();
    }, REFRESH_MS);
  }
}

/** Sets the form from the URL (on load and on back/forward). */
function readUrl() {
  const filters = currentFilters();
  for (const key of FILTERS) $('filters').elements[key].value = filters[key];
  state.openId = new URLSearchParams(location.search).get('job');
}

function applyFilters(filters) {
  setUrl(filters);
  readUrl();
  renderStatusTabs();
  state.jobs = [];
  refreshJobs();
}

$('filters').addEventListener('submit', (event) => {
  event.preventDefault();
  const form = new FormData($('filters'));
  applyFilters(Object.fromEntries(FILTERS.map((key) => [key, String(form.get(key) ?? '').trim()])));
});
$('clear-filters').addEventListener('click', () => applyFilters({ status: '', name: '', search: '' }));
$('more').addEventListener('click', loadMore);
$('retry').addEventListener('click', () => act('retry'));
$('promote').addEventListener('click', () => act('promote'));
$('bulk').hidden = readOnly;
$('bulk-retry').addEventListener('submit', bulkRetry);
$('bulk-retry').addEventListener('change', renderBulkRetryCount);
$('bulk-purge').addEventListener('submit', bulkPurge);
$('cancel').addEventListener('click', () => act('cancel'));
$('close-panel').addEventListener('click', closePanel);
// The clipboard API exists in secure contexts only (HTTPS, localhost): elsewhere the button is hidden, and the panel's
// title holds the whole id to select.
$('copy-id').hidden = !navigator.clipboard;
$('copy-id').addEventListener('click', async () => {
  try {
    await navigator.clipboard.writeText(state.openId);
    $('panel-message').textContent = 'Id copied.';
  } catch (error) {
    $('panel-message').textContent = `Copy refused by the browser (${error.message}): select the id in the title.`;
  }
});
$('panel').addEventListener('keydown', (event) => {
  if (event.key === 'Escape') closePanel();
});
$('auto-refresh').addEventListener('change', schedule);
window.addEventListener('popstate', () => {
  readUrl();
  renderStatusTabs();
  state.jobs = [];
  refreshAll();
});

readUrl();
refreshAll().then(schedule);
