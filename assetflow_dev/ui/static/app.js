// The operator page: polls the API, keeps the user's selection and form input across refreshes, and acts.

import { ApiError, UnreachableError, adoptTokenFromFragment, api, getToken, setToken } from './api.js';
import { h, paint } from './dom.js';
import { renderGraph } from './graph.js';
import * as views from './views.js';

const query = new URLSearchParams(window.location.search);
const REFRESH_MS = Math.min(60000, Math.max(500, (Number(query.get('refresh')) || 3) * 1000));
const CATALOG_EVERY = 10; // refreshes between two catalog reads: definitions change rarely
const EXPLAIN_BATCH = 12; // explains read per refresh, in turn, besides the selected pipeline's
const RUNS_LIMIT = 50;
const PIPELINE_RUNS_LIMIT = 20;
const EVENTS_LIMIT = 25;
const QUARANTINE_LIMIT = 50;
const NOTICE_MS = 15000;
const SELECTION_KEY = 'assetflow.selection';

const $ = (id) => document.getElementById(id);

const state = {
  catalog: null,
  catalogError: null,
  assets: null,
  runs: null,
  quarantine: null,
  explains: {},
  pipelineDetail: null, // {id, queue, runs}
  runDetail: null, // {id, doc}
  events: null, // {uri, doc}
  selected: loadSelection(),
  connection: { kind: 'connecting' },
};

let refreshes = 0;
let timer = null;
let busy = false;
let again = false;
let noticeTimer = null;

function loadSelection() {
  try {
    const saved = JSON.parse(window.sessionStorage.getItem(SELECTION_KEY) || '{}');
    return { pipeline: saved.pipeline || null, run: saved.run || null, asset: saved.asset || null };
  } catch {
    return { pipeline: null, run: null, asset: null };
  }
}

function saveSelection() {
  try {
    window.sessionStorage.setItem(SELECTION_KEY, JSON.stringify(state.selected));
  } catch {
    // Storage refused (private mode): the selection then lasts as long as the page.
  }
}

function describe(error) {
  if (error instanceof ApiError) return `${error.status} ${error.code}: ${error.detail}`;
  return error && error.message ? error.message : String(error);
}

/** Whether an error says something about the whole connection rather than about one resource. */
function isConnectionError(error) {
  return error instanceof UnreachableError || (error instanceof ApiError && (error.status === 401 || error.status === 403));
}

function assetName(uri) {
  const fromCatalog = state.catalog?.assets?.[uri]?.name;
  if (fromCatalog) return fromCatalog;
  const listed = state.assets?.items?.find((a) => a.uri === uri);
  return listed?.name || uri;
}

// ---- refreshing ------------------------------------------------------------------------------------

async function refreshOnce() {
  const selected = { ...state.selected };
  const failures = [];
  const take = async (promise) => {
    try {
      return { value: await promise };
    } catch (error) {
      failures.push(error);
      return { error };
    }
  };
  // A document, the error it gave (so its panel says so), or the last good one when the connection failed.
  const keep = (result, previous) => {
    if (!result) return previous;
    if ('value' in result) return result.value;
    return isConnectionError(result.error) ? previous : { error: describe(result.error) };
  };

  if (!state.catalog || refreshes % CATALOG_EVERY === 0) {
    const result = await take(api.catalog());
    if ('value' in result) {
      state.catalog = result.value;
      state.catalogError = null;
    } else if (!isConnectionError(result.error)) {
      state.catalogError = describe(result.error);
    }
  }
  const ids = state.catalog ? Object.keys(state.catalog.pipelines || {}).sort() : [];
  // Many pipelines: a few explains per refresh in turn, so that a refresh stays a bounded number of calls.
  const start = (refreshes * EXPLAIN_BATCH) % Math.max(1, ids.length);
  const turn = ids.length <= EXPLAIN_BATCH ? ids : [...ids, ...ids].slice(start, start + EXPLAIN_BATCH);
  refreshes += 1;
  if (selected.pipeline && state.catalog && !ids.includes(selected.pipeline)) {
    state.selected.pipeline = null;
    selected.pipeline = null;
    saveSelection();
  }

  const [assets, runs, quarantine, explains, queue, pipelineRuns, run, events] = await Promise.all([
    take(api.assets()),
    take(api.runs(RUNS_LIMIT)),
    take(api.quarantine(QUARANTINE_LIMIT)),
    Promise.all(ids.map((id) => (turn.includes(id) || id === selected.pipeline ? take(api.explain(id)) : null))),
    selected.pipeline ? take(api.queue(selected.pipeline)) : null,
    selected.pipeline ? take(api.pipelineRuns(selected.pipeline, PIPELINE_RUNS_LIMIT)) : null,
    selected.run ? take(api.run(selected.run)) : null,
    selected.asset ? take(api.assetEvents(selected.asset, EVENTS_LIMIT)) : null,
  ]);

  state.assets = keep(assets, state.assets);
  state.runs = keep(runs, state.runs);
  state.quarantine = keep(quarantine, state.quarantine);
  const nextExplains = {};
  ids.forEach((id, i) => {
    nextExplains[id] = keep(explains[i], state.explains[id]);
  });
  state.explains = nextExplains;
  // A selection changed while these were loading: their answers belong to the old one.
  if (selected.pipeline && selected.pipeline === state.selected.pipeline) {
    const previous = state.pipelineDetail?.id === selected.pipeline ? state.pipelineDetail : {};
    state.pipelineDetail = { id: selected.pipeline, queue: keep(queue, previous.queue), runs: keep(pipelineRuns, previous.runs) };
  }
  if (selected.run && selected.run === state.selected.run) {
    const previous = state.runDetail?.id === selected.run ? state.runDetail.doc : null;
    const doc = keep(run, previous);
    state.runDetail = { id: selected.run, doc: doc && doc.error ? { ...doc, run_id: selected.run } : doc };
  }
  if (selected.asset && selected.asset === state.selected.asset) {
    const previous = state.events?.uri === selected.asset ? state.events.doc : null;
    state.events = { uri: selected.asset, doc: keep(events, previous) };
  }

  const refused = failures.find((e) => e instanceof ApiError && (e.status === 401 || e.status === 403));
  const unreachable = failures.find((e) => e instanceof UnreachableError);
  if (refused) state.connection = { kind: 'signin', status: refused.status, detail: refused.detail };
  else if (unreachable) state.connection = { kind: 'unreachable', detail: unreachable.message };
  else state.connection = { kind: 'live', at: new Date() };
}

async function tick() {
  window.clearTimeout(timer);
  if (busy) {
    again = true;
    return;
  }
  busy = true;
  try {
    do {
      again = false;
      if (document.hidden) break; // nobody is looking: the next visible moment refreshes at once
      try {
        await refreshOnce();
      } catch (error) {
        state.connection = { kind: 'unreachable', detail: describe(error) };
      }
      render();
    } while (again);
  } finally {
    busy = false;
    timer = window.setTimeout(tick, REFRESH_MS);
  }
}

function refreshNow() {
  tick();
}

// ---- rendering -------------------------------------------------------------------------------------

const handlers = {
  selectPipeline,
  selectRun,
  selectAsset,
  cancelRun: (id) => act(`Cancel run ${id}`, () => api.cancelRun(id), (run) => `Run ${run.run_id || id} is ${run.state || 'cancelling'}.`),
  replayRun: (id) =>
    act(`Replay run ${id}`, () => api.replayRun(id), (run) => {
      selectRun(run.run_id);
      return `Replay of ${id} created: run ${run.run_id} (${run.state}).`;
    }),
};

function render() {
  renderConnection();
  renderGraphPanel();
  renderPipelines();
  renderPipelineDetail();
  paint($('runs'), [state.runs, state.selected.run], () => views.runTable(state.runs, state.selected.run, handlers));
  renderRunDetail();
  paint($('assets'), [state.assets, state.selected.asset], () => views.assetTable(state.assets, state.selected.asset, handlers));
  renderEvents();
  paint($('quarantine'), state.quarantine, () => views.quarantineTable(state.quarantine));
  const uris = state.catalog ? Object.keys(state.catalog.assets || {}).sort() : [];
  paint($('asset-options'), uris, () => uris.map((uri) => h('option', { value: uri, label: assetName(uri) })));
}

function renderConnection() {
  const { kind, detail, status, at } = state.connection;
  const pill = $('connection');
  const problem = $('problem');
  const every = `${REFRESH_MS / 1000} s`;
  pill.className = `connection ${kind}`;
  document.body.classList.toggle('stale', kind === 'unreachable' || kind === 'signin');
  $('signin').hidden = kind !== 'signin';
  if (kind === 'live') {
    pill.textContent = `Live · refreshed ${at.toLocaleTimeString()}`;
    problem.hidden = true;
    problem.replaceChildren();
    return;
  }
  if (kind === 'connecting') {
    pill.textContent = 'Connecting…';
    return;
  }
  problem.hidden = false;
  if (kind === 'unreachable') {
    pill.textContent = 'API unreachable';
    problem.replaceChildren(
      h('strong', {}, 'The API is unreachable'),
      ` (${detail}). Retrying every ${every}; the data below may be out of date. Is `,
      h('code', {}, 'assetflow dev up'),
      ' (or ',
      h('code', {}, 'assetflow ui'),
      ') still running?',
    );
    return;
  }
  const token = getToken();
  pill.textContent = token ? 'Token refused' : 'Not signed in';
  if (status === 403) {
    problem.replaceChildren(
      h('strong', {}, 'Sign-in problem: '),
      `the API refused the credentials (403: ${detail}). For a deployed environment, check the AWS credentials that `,
      h('code', {}, 'assetflow ui --env NAME'),
      ' signs with.',
    );
  } else {
    problem.replaceChildren(
      h('strong', {}, 'Sign-in problem: '),
      token ? `the API refused the token (401: ${detail}).` : 'this tab has no API token yet.',
      ' Open the page from its ui link (it carries the token), or paste the token below.',
    );
  }
}

function graphStatus(node) {
  if (node.kind === 'pipeline') return views.pipelineStatus(state.explains[node.key]);
  if (node.kind === 'asset') {
    const asset = state.assets?.items?.find((a) => a.uri === node.key);
    const health = asset?.health;
    if (!health) return null;
    const cls = health === 'fresh' ? 'fresh' : 'problem';
    return { cls, text: health === 'fresh' ? node.sub : health.replace('_', ' '), label: health.replace('_', ' ') };
  }
  return null;
}

function renderGraphPanel() {
  const region = $('graph');
  if (!state.catalog) {
    paint(region, ['none', state.catalogError], () =>
      state.catalogError
        ? h('p', { class: 'error', role: 'alert' }, `Could not load the catalog: ${state.catalogError}`)
        : h('p', { class: 'empty' }, 'Loading the catalog…'),
    );
    return;
  }
  const ids = Object.keys(state.catalog.pipelines || {});
  const health = (state.assets?.items || []).map((a) => [a.uri, a.health]);
  const statuses = ids.map((id) => [id, views.pipelineStatus(state.explains[id]).text]);
  paint(region, [state.catalog, health, statuses, state.selected.pipeline, state.selected.asset], () => {
    const svg = renderGraph(state.catalog, {
      status: graphStatus,
      selected: (node) =>
        (node.kind === 'pipeline' && node.key === state.selected.pipeline) || (node.kind === 'asset' && node.key === state.selected.asset),
      onSelect: (node) => (node.kind === 'pipeline' ? selectPipeline(node.key, true) : selectAsset(node.key, true)),
    });
    // Shrink a wide graph to the page, but not below a size whose labels still read.
    svg.style.minWidth = `${Math.round(Number(svg.getAttribute('width')) * 0.7)}px`;
    return svg;
  });
}

function renderPipelines() {
  const region = $('pipelines');
  if (!state.catalog) {
    paint(region, 'none', () => h('p', { class: 'empty' }, state.catalogError ? 'No catalog.' : 'Loading…'));
    return;
  }
  const statuses = Object.fromEntries(Object.entries(state.explains).map(([id, e]) => [id, e && (e.error || [e.due, e.blocked_by, e.updated, e.required])]));
  paint(region, [Object.keys(state.catalog.pipelines || {}), statuses, state.selected.pipeline], () =>
    views.pipelineList(state.catalog, state.explains, state.selected.pipeline, handlers, assetName),
  );
}

function renderPipelineDetail() {
  const id = state.selected.pipeline;
  $('pipeline-none').hidden = Boolean(id);
  $('pipeline-body').hidden = !id;
  $('pipeline-title').textContent = id ? `Pipeline ${id}` : 'Pipeline';
  if (!id) return;
  const definition = state.catalog?.pipelines?.[id];
  const explain = state.explains[id];
  paint($('explain'), [id, definition, explain], () => [
    definition
      ? h(
          'p',
          { class: 'facts-line' },
          h('span', { class: 'muted' }, 'Schedule: '),
          views.scheduleText(definition.schedule, assetName),
          h('span', { class: 'muted' }, ' · max active runs: '),
          definition.max_active_runs ?? 'unlimited',
          definition.partitioned ? h('span', { class: 'muted' }, ' · partition-aware') : null,
          definition.batch === false ? h('span', { class: 'muted' }, ' · one run per event') : null,
        )
      : null,
    views.explainPanel(explain, assetName),
  ]);
  const paused = views.isPaused(explain);
  $('pause-button').disabled = paused === true;
  $('unpause-button').disabled = paused === false;
  const detail = state.pipelineDetail?.id === id ? state.pipelineDetail : null;
  paint($('queue'), [id, detail?.queue], () => views.queuePanel(detail?.queue, handlers, assetName));
  paint($('pipeline-runs'), [id, detail?.runs, state.selected.run], () =>
    views.runTable(detail?.runs, state.selected.run, handlers, { showPipeline: false, what: 'the runs', keyPrefix: 'pruns' }),
  );
}

function renderRunDetail() {
  const id = state.selected.run;
  const doc = state.runDetail?.id === id ? state.runDetail.doc : null;
  $('run-title').textContent = id ? `Run ${id}` : 'Run';
  paint($('run-detail'), [id, doc], () => (id && !doc ? h('p', { class: 'empty' }, 'Loading…') : views.runDetail(doc, handlers, assetName)));
}

function renderEvents() {
  const uri = state.selected.asset;
  const doc = state.events?.uri === uri ? state.events.doc : null;
  $('events-title').textContent = uri ? `Events of ${assetName(uri)}` : 'Asset events';
  paint($('asset-events'), [uri, doc], () => views.assetEvents(uri, doc, handlers, assetName));
}

// ---- selection -------------------------------------------------------------------------------------

function reveal(panelId, headingId) {
  $(panelId).scrollIntoView({ block: 'start' });
  $(headingId).focus({ preventScroll: true });
}

function selectPipeline(id, jump = false) {
  state.selected.pipeline = id;
  saveSelection();
  render();
  if (jump) reveal('pipeline-panel', 'pipeline-title');
  refreshNow();
}

function selectRun(id, jump = false) {
  state.selected.run = id;
  saveSelection();
  render();
  if (jump) reveal('run-panel', 'run-title');
  refreshNow();
}

function selectAsset(uri, jump = false) {
  state.selected.asset = uri;
  saveSelection();
  const field = $('emit-uri');
  if (!field.value) field.value = uri;
  render();
  if (jump) reveal('events-panel', 'events-title');
  refreshNow();
}

// ---- actions ---------------------------------------------------------------------------------------

function notify(kind, text) {
  const notice = $('notice');
  window.clearTimeout(noticeTimer);
  notice.className = `notice ${kind}`;
  notice.hidden = false;
  notice.replaceChildren(
    h('span', { 'data-testid': 'notice-text' }, text),
    h('button', { type: 'button', class: 'small', 'aria-label': 'Dismiss', onclick: () => (notice.hidden = true) }, '×'),
  );
  if (kind === 'ok') noticeTimer = window.setTimeout(() => (notice.hidden = true), NOTICE_MS);
}

function failed(what, error) {
  if (isConnectionError(error)) {
    state.connection =
      error instanceof UnreachableError
        ? { kind: 'unreachable', detail: error.message }
        : { kind: 'signin', status: error.status, detail: error.detail };
    renderConnection();
  }
  return `${what} failed: ${describe(error)}`;
}

async function act(what, call, success) {
  try {
    const result = await call();
    notify('ok', success(result || {}));
  } catch (error) {
    notify('error', failed(what, error));
  }
  refreshNow();
}

/** An optional JSON object from a text field: undefined when empty. @throws {Error} not an object. */
function jsonObject(text, what) {
  if (!text.trim()) return undefined;
  let value;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new Error(`${what} is not valid JSON (${error.message})`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Error(`${what} must be a JSON object`);
  return value;
}

function formError(output, text) {
  output.replaceChildren(h('p', { class: 'error', role: 'alert', 'data-testid': 'form-error' }, text));
}

async function submitWith(form, output, work) {
  const button = form.querySelector('button[type=submit]');
  button.disabled = true;
  output.replaceChildren(h('p', { class: 'muted' }, 'Sending…'));
  try {
    await work();
  } finally {
    button.disabled = false;
  }
}

async function onEmit(event) {
  event.preventDefault();
  const form = event.currentTarget;
  const output = $('emit-result');
  const uri = $('emit-uri').value.trim();
  const partitionKey = $('emit-partition').value.trim();
  const body = { uri };
  try {
    const extra = jsonObject($('emit-extra').value, 'Extra');
    if (extra !== undefined) body.extra = extra;
  } catch (error) {
    formError(output, error.message);
    return;
  }
  if (!uri) {
    formError(output, 'Give the URI of the asset to emit an event for.');
    return;
  }
  if (partitionKey) body.partition_key = partitionKey;
  await submitWith(form, output, async () => {
    try {
      const created = await api.emitEvent(body);
      output.replaceChildren(views.createdEvent(created, handlers, assetName));
      state.selected.asset = created.asset || uri;
      saveSelection();
      refreshNow();
    } catch (error) {
      formError(output, failed('Emit event', error));
    }
  });
}

async function onTrigger(event) {
  event.preventDefault();
  const form = event.currentTarget;
  const output = $('trigger-result');
  const id = state.selected.pipeline;
  if (!id) return;
  const body = {};
  try {
    const conf = jsonObject($('trigger-conf').value, 'Conf');
    if (conf !== undefined) body.conf = conf;
  } catch (error) {
    formError(output, error.message);
    return;
  }
  const partitionKey = $('trigger-partition').value.trim();
  if (partitionKey) body.partition_key = partitionKey;
  await submitWith(form, output, async () => {
    try {
      const run = await api.triggerRun(id, body);
      output.replaceChildren(
        h(
          'p',
          { class: 'ok', 'data-testid': 'trigger-created' },
          'Created run ',
          h('button', { type: 'button', class: 'link', onclick: () => selectRun(run.run_id, true) }, run.run_id),
          ` of ${run.pipeline || id} (${run.state}).`,
        ),
      );
      selectRun(run.run_id);
    } catch (error) {
      formError(output, failed(`Trigger ${id}`, error));
    }
  });
}

function onPause(pause) {
  const id = state.selected.pipeline;
  if (!id) return;
  const verb = pause ? 'Pause' : 'Unpause';
  act(`${verb} ${id}`, () => (pause ? api.pause(id) : api.unpause(id)), () => `${id} ${pause ? 'paused' : 'unpaused'}.`);
}

function onSignIn(event) {
  event.preventDefault();
  const field = $('signin-token');
  const token = field.value.trim();
  if (!token) return;
  setToken(token);
  field.value = '';
  state.connection = { kind: 'connecting' };
  renderConnection();
  refreshNow();
}

// ---- start -----------------------------------------------------------------------------------------

function start() {
  adoptTokenFromFragment();
  $('emit-form').addEventListener('submit', onEmit);
  $('trigger-form').addEventListener('submit', onTrigger);
  $('pause-button').addEventListener('click', () => onPause(true));
  $('unpause-button').addEventListener('click', () => onPause(false));
  $('signin-form').addEventListener('submit', onSignIn);
  window.addEventListener('hashchange', () => {
    if (adoptTokenFromFragment()) refreshNow();
  });
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden) refreshNow();
  });
  render();
  refreshNow();
}

start();
