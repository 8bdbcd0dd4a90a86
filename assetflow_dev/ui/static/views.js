// The page's panels, built from API documents. Each function returns elements; app.js decides when.

import { empty, h, jsonDetails, table, time } from './dom.js';

/** The one reason explain gives for waiting, in words. */
export const BLOCKED_BY = {
  assets: 'Waiting for assets',
  max_active_runs: 'At its limit of active runs (max_active_runs)',
  debounce: 'Waiting for the debounce quiet period to pass',
  time: 'Waiting for its scheduled time',
  paused: 'Paused: events keep queueing, no run starts',
};

const SHORT_BLOCKED = {
  assets: 'waiting for assets',
  max_active_runs: 'at max active runs',
  debounce: 'debouncing',
  time: 'waiting for time',
  paused: 'paused',
};

const OPS = { all: 'all of', any: 'any of', at_least: 'at least', then: 'then', where: 'where', late: 'late', failed: 'failed' };

export const TRIGGERED_BY = {
  assets: 'asset events',
  time: 'schedule time',
  manual: 'manual',
  replay: 'replay',
  backfill: 'backfill',
};

const ACTIVE = new Set(['queued', 'running']);

/** A short status of a pipeline for chips and graph nodes: `{cls, text, label}`. */
export function pipelineStatus(explain) {
  if (!explain) return { cls: 'unknown', text: '', label: '' };
  if (explain.error) return { cls: 'unknown', text: 'explain unavailable', label: 'explain unavailable' };
  if (explain.due) return { cls: 'due', text: 'due', label: 'due: a run starts' };
  const reason = explain.blocked_by;
  const short = SHORT_BLOCKED[reason] || String(reason || 'waiting');
  const cls = reason === 'paused' ? 'paused' : 'blocked';
  return { cls, text: short, label: BLOCKED_BY[reason] || short };
}

export function isPaused(explain) {
  if (!explain || explain.error) return null;
  if (typeof explain.paused === 'boolean') return explain.paused;
  return explain.blocked_by === 'paused';
}

/** `(curated & readings) | refresh`, as the definitions read. */
export function conditionText(condition, names) {
  if (!condition) return 'manual only';
  const type = condition.type;
  if (type === 'asset') return names(condition.uri);
  if (type === 'alias') return `alias ${condition.name}`;
  const children = condition.of || condition.children;
  if ((type === 'all' || type === 'any') && Array.isArray(children)) {
    const join = type === 'all' ? ' & ' : ' | ';
    return children.map((c) => (c.of || c.children ? `(${conditionText(c, names)})` : conditionText(c, names))).join(join);
  }
  const inner = Array.isArray(children) ? children.map((c) => conditionText(c, names)).join(', ') : condition.uri ? names(condition.uri) : '';
  return `${type}(${inner})`;
}

export function scheduleText(schedule, names) {
  if (!schedule) return 'manual only';
  const parts = [];
  if (schedule.condition) parts.push(conditionText(schedule.condition, names));
  if (schedule.cron) parts.push(`${schedule.cron}${schedule.timezone ? ` ${schedule.timezone}` : ''}`);
  let text = parts.join(schedule.kind === 'asset_and_time' ? ' and at ' : ' or ') || 'manual only';
  if (schedule.kind === 'partitioned') text += `, per ${schedule.mapper?.grain || ''} partition`.replace(' ,', ',');
  return text;
}

function stateBadge(state) {
  return h('span', { class: `badge state-${state}`, 'data-testid': 'run-state' }, state);
}

function healthBadge(health) {
  return h('span', { class: `badge health-${health || 'unknown'}`, 'data-testid': 'asset-health' }, (health || 'unknown').replace('_', ' '));
}

function linkButton(text, onclick, attrs = {}) {
  return h('button', { type: 'button', class: 'link', onclick, ...attrs }, text);
}

export function pipelineList(catalog, explains, selected, on, names) {
  const ids = Object.keys(catalog.pipelines || {}).sort();
  if (!ids.length) return empty('The catalog has no pipelines.');
  const rows = ids.map((id) => {
    const status = pipelineStatus(explains[id]);
    const explain = explains[id];
    const counts = explain && !explain.error && typeof explain.required === 'number' ? `${explain.updated} of ${explain.required}` : '';
    return h(
      'tr',
      { class: id === selected ? 'selected' : '', 'data-testid': 'pipeline-row', 'data-id': id },
      h('td', {}, h('button', { type: 'button', class: 'link strong', 'aria-pressed': String(id === selected), 'data-key': `pipeline:${id}`, onclick: () => on.selectPipeline(id) }, id)),
      h('td', { class: 'schedule' }, scheduleText(catalog.pipelines[id].schedule, names)),
      h('td', {}, h('span', { class: `chip ${status.cls}`, title: status.label }, status.text || '…')),
      h('td', { class: 'num' }, counts),
    );
  });
  return table(['Pipeline', 'Schedule', 'Status', 'Assets'], rows, { class: 'list' });
}

function queuedText(queued) {
  if (Array.isArray(queued)) return `${queued.length} queued`;
  if (typeof queued === 'number') return `${queued} queued`;
  return null;
}

function conditionNode(node, names) {
  const op = node.op || node.type || (node.uri ? 'asset' : 'condition');
  const truth = node.value === true ? 'true' : node.value === false ? 'false' : 'unknown';
  const children = node.children || node.of || [];
  const words = [];
  if (node.uri) {
    words.push(h('span', { class: 'cond-asset' }, names(node.uri)), ' ', h('code', { class: 'uri' }, node.uri));
  } else if (op === 'alias') {
    words.push(h('span', { class: 'cond-op' }, 'alias'), ' ', h('code', {}, node.name || ''));
  } else {
    words.push(h('span', { class: 'cond-op' }, OPS[op] || op));
  }
  for (const [key, value] of Object.entries(node)) {
    if (['op', 'type', 'value', 'children', 'of', 'uri', 'queued', 'name'].includes(key)) continue;
    if (value === null || typeof value === 'object') continue;
    words.push(' ', h('span', { class: 'cond-arg' }, `${key}=${value}`));
  }
  const queued = queuedText(node.queued);
  const title = Array.isArray(node.queued) ? node.queued.map((e) => (e && e.id) || String(e)).join(', ') : null;
  return h(
    'li',
    { class: `cond ${truth}`, 'data-testid': 'condition-node', 'data-value': truth, 'data-op': op, 'data-uri': node.uri || null },
    h('span', { class: `truth ${truth}`, 'aria-label': truth, title: truth }, truth === 'true' ? '✓' : truth === 'false' ? '✗' : '?'),
    ' ',
    words,
    queued ? h('span', { class: 'queued', title }, queued) : null,
    children.length ? h('ul', {}, children.map((child) => conditionNode(child, names))) : null,
  );
}

export function explainPanel(explain, names) {
  if (!explain) return empty('Loading the explain status…');
  if (explain.error) return h('p', { class: 'error', role: 'alert' }, `Could not load the explain status: ${explain.error}`);
  const status = pipelineStatus(explain);
  const missing = explain.missing || [];
  const reason = explain.due
    ? h('p', { class: 'verdict due', 'data-testid': 'explain-blocked', 'data-blocked-by': 'null' }, 'Due: a run starts now')
    : h(
        'p',
        { class: `verdict ${status.cls}`, 'data-testid': 'explain-blocked', 'data-blocked-by': explain.blocked_by || '' },
        BLOCKED_BY[explain.blocked_by] || `Blocked: ${explain.blocked_by}`,
      );
  return [
    h(
      'div',
      { class: 'explain-head' },
      h('p', { class: 'big', 'data-testid': 'explain-updated' }, `${explain.updated} of ${explain.required} assets updated`),
      reason,
    ),
    missing.length
      ? h(
          'div',
          { class: 'missing', 'data-testid': 'explain-missing' },
          h('span', { class: 'muted' }, 'Missing: '),
          missing.map((uri, i) => [i ? ', ' : '', h('span', { title: uri }, names(uri))]),
        )
      : null,
    (explain.late || []).length
      ? h(
          'div',
          { class: 'missing', 'data-testid': 'explain-late' },
          h('span', { class: 'badge health-late' }, 'late'),
          ' ',
          explain.late.map((late, i) => [
            i ? ', ' : '',
            h('span', { title: late.uri }, names(late.uri)),
            late.partition_key ? ` (partition ${late.partition_key})` : '',
            ` missed ${late.deadline}`,
          ]),
        )
      : null,
    explain.condition
      ? h('ul', { class: 'tree', 'data-testid': 'condition-tree', 'aria-label': 'Condition tree' }, conditionNode(explain.condition, names))
      : null,
  ];
}

function sourceView(source, on) {
  if (!source || typeof source !== 'object') return h('span', { class: 'muted' }, '—');
  if (source.type === 'run' && source.run_id) {
    return h(
      'span',
      {},
      'run ',
      linkButton(source.run_id, () => on.selectRun(source.run_id, true), {
        'data-testid': 'event-run-link',
        'data-key': `source-run:${source.run_id}`,
        title: `open run ${source.run_id}${source.pipeline ? ` of ${source.pipeline}` : ''}`,
      }),
      source.pipeline ? h('span', { class: 'muted' }, ` (${source.pipeline})`) : null,
    );
  }
  if (source.type === 'watcher') return `watcher ${source.watcher || ''}${source.kind ? ` (${source.kind})` : ''}`;
  if (source.type === 'api') return h('span', { title: source.principal || '' }, 'API');
  return h('span', { title: JSON.stringify(source) }, source.type || JSON.stringify(source));
}

/** Events as a table: id, time, partition, what produced it (linked when a run did), extra. */
export function eventTable(events, on, { withAsset = false, names, keyPrefix = 'ev' } = {}) {
  const rows = events.map((event) =>
    h(
      'tr',
      { 'data-testid': 'event-row', 'data-id': event.id },
      withAsset
        ? h('td', {}, linkButton(names(event.asset), () => on.selectAsset(event.asset, true), {
            title: event.asset,
            'data-testid': 'event-asset-link',
            'data-key': `${keyPrefix}-asset:${event.id}`,
          }))
        : null,
      h('td', {}, h('code', { class: 'id' }, event.id)),
      h('td', {}, time(event.timestamp, true)),
      h('td', {}, event.partition_key ?? h('span', { class: 'muted' }, '—')),
      h('td', {}, sourceView(event.source, on)),
      h('td', {}, jsonDetails(event.extra, `${keyPrefix}-extra:${event.id}`)),
    ),
  );
  const headers = [withAsset ? 'Asset' : null, 'Event', 'Time', 'Partition', 'Source', 'Extra'].filter(Boolean);
  return table(headers, rows, { class: 'list events' });
}

export function queuePanel(doc, on, names) {
  if (!doc) return empty('Loading the queue…');
  if (doc.error) return h('p', { class: 'error', role: 'alert' }, `Could not load the queue: ${doc.error}`);
  const items = doc.items || [];
  const head = typeof doc.required === 'number' ? h('p', { 'data-testid': 'queue-updated' }, `${doc.updated} of ${doc.required} assets updated`) : null;
  if (!items.length) return [head, empty('No queued events.')];
  const rows = items.map((entry) => {
    const event = entry.event || {};
    return h(
      'tr',
      { 'data-testid': 'queue-row', 'data-id': event.id },
      h('td', {}, linkButton(names(event.asset), () => on.selectAsset(event.asset, true), { title: event.asset, 'data-key': `queue-asset:${event.id}` })),
      h('td', {}, h('code', { class: 'id' }, event.id)),
      h('td', {}, time(event.timestamp, true)),
      h('td', {}, entry.queue_key ?? h('span', { class: 'muted' }, '—')),
      h('td', {}, (entry.aliases || []).join(', ') || h('span', { class: 'muted' }, '—')),
      h('td', {}, sourceView(event.source, on)),
    );
  });
  return [head, table(['Asset', 'Event', 'Time', 'Queue key', 'Via alias', 'Source'], rows, { class: 'list' }), doc.next ? empty('More entries exist.') : null];
}

function eventCount(run) {
  return Object.values(run.triggering_asset_events || {}).reduce((n, events) => n + events.length, 0);
}

function runActions(run, on) {
  return [
    ACTIVE.has(run.state)
      ? h('button', { type: 'button', class: 'small danger', 'data-testid': 'cancel-run', 'data-key': `cancel:${run.run_id}`, onclick: () => on.cancelRun(run.run_id) }, 'Cancel')
      : null,
    h('button', { type: 'button', class: 'small', 'data-testid': 'replay-run', 'data-key': `replay:${run.run_id}`, onclick: () => on.replayRun(run.run_id) }, 'Replay'),
  ];
}

export function runTable(doc, selectedRun, on, { showPipeline = true, what = 'runs', keyPrefix = 'runs' } = {}) {
  if (!doc) return empty('Loading…');
  if (doc.error) return h('p', { class: 'error', role: 'alert' }, `Could not load ${what}: ${doc.error}`);
  const runs = doc.items || [];
  if (!runs.length) return empty('No runs yet.');
  const rows = runs.map((run) => {
    const assets = Object.keys(run.triggering_asset_events || {});
    return h(
      'tr',
      { class: run.run_id === selectedRun ? 'selected' : '', 'data-testid': 'run-row', 'data-id': run.run_id },
      h(
        'td',
        {},
        h('button', { type: 'button', class: 'link strong', 'aria-pressed': String(run.run_id === selectedRun), 'data-key': `${keyPrefix}:${run.run_id}`, onclick: () => on.selectRun(run.run_id) }, run.run_id),
        showPipeline
          ? [h('br'), linkButton(run.pipeline, () => on.selectPipeline(run.pipeline, true), { class: 'link id small-text', title: `pipeline ${run.pipeline}`, 'data-key': `${keyPrefix}-pipeline:${run.run_id}` })]
          : null,
      ),
      h('td', {}, stateBadge(run.state)),
      h(
        'td',
        { title: assets.join('\n') || null },
        TRIGGERED_BY[run.triggered_by] || run.triggered_by || '—',
        run.replay_of ? ` of ${run.replay_of}` : null,
        assets.length ? h('span', { class: 'muted' }, ` · ${eventCount(run)} event${eventCount(run) === 1 ? '' : 's'}`) : null,
      ),
      h('td', {}, time(run.created_at, true)),
      h('td', { class: 'actions-cell' }, runActions(run, on)),
    );
  });
  const headers = [showPipeline ? 'Run / pipeline' : 'Run', 'State', 'Triggered by', 'Created', 'Actions'];
  return [table(headers, rows, { class: 'list' }), doc.next ? empty(`Showing the newest ${runs.length}.`) : null];
}

function eventGroups(grouped, on, names, testid, keyPrefix) {
  const uris = Object.keys(grouped || {});
  return h(
    'div',
    { 'data-testid': testid },
    uris.map((uri) =>
      h(
        'div',
        { class: 'event-group', 'data-testid': 'event-group', 'data-asset': uri },
        h(
          'h4',
          {},
          linkButton(names(uri), () => on.selectAsset(uri, true), { 'data-testid': 'run-asset-link', 'data-key': `${keyPrefix}-asset:${uri}`, title: `show the events of ${uri}` }),
          ' ',
          h('code', { class: 'uri' }, uri),
        ),
        eventTable(grouped[uri], on, { names, keyPrefix }),
      ),
    ),
  );
}

export function runDetail(run, on, names) {
  if (!run) return empty('Select a run to see what triggered it and what it produced.');
  if (run.error) return h('p', { class: 'error', role: 'alert' }, `Could not load run ${run.run_id}: ${run.error}`);
  const facts = [
    ['Run', h('code', { 'data-testid': 'run-id' }, run.run_id)],
    ['Pipeline', linkButton(run.pipeline, () => on.selectPipeline(run.pipeline, true), { 'data-key': `detail-pipeline:${run.run_id}` })],
    ['State', stateBadge(run.state)],
    ['Triggered by', TRIGGERED_BY[run.triggered_by] || run.triggered_by || '—'],
    run.replay_of
      ? ['Replay of', linkButton(run.replay_of, () => on.selectRun(run.replay_of), { 'data-testid': 'replay-of-link', 'data-key': `replay-of:${run.run_id}` })]
      : null,
    ['Created', time(run.created_at)],
    run.scheduled_time ? ['Scheduled for', time(run.scheduled_time)] : null,
    ['Partition key', run.partition_key ?? h('span', { class: 'muted' }, '—')],
    ['EMR job run', run.job_run_id ? h('code', {}, run.job_run_id) : h('span', { class: 'muted' }, '—')],
    ['Conf', run.conf ? h('pre', { class: 'conf', 'data-testid': 'run-conf' }, JSON.stringify(run.conf, null, 2)) : h('span', { class: 'muted' }, '—')],
  ].filter(Boolean);
  const triggering = run.triggering_asset_events || {};
  const produced = run.produced_asset_events || {};
  return [
    h('dl', { class: 'facts' }, facts.map(([term, value]) => [h('dt', {}, term), h('dd', {}, value)])),
    h('div', { class: 'row' }, runActions(run, on)),
    h('h3', {}, 'Triggering events'),
    Object.keys(triggering).length
      ? eventGroups(triggering, on, names, 'triggering-events', 'trig')
      : empty(run.triggered_by && run.triggered_by !== 'assets' ? 'None: no asset event triggered this run.' : 'None.'),
    Object.keys(produced).length ? [h('h3', {}, 'Produced events'), eventGroups(produced, on, names, 'produced-events', 'prod')] : null,
  ];
}

export function assetTable(doc, selectedAsset, on) {
  if (!doc) return empty('Loading…');
  if (doc.error) return h('p', { class: 'error', role: 'alert' }, `Could not load the assets: ${doc.error}`);
  const items = doc.items || [];
  if (!items.length) return empty('No assets.');
  const rows = items.map((asset) =>
    h(
      'tr',
      { class: asset.uri === selectedAsset ? 'selected' : '', 'data-testid': 'asset-row', 'data-id': asset.uri },
      h(
        'td',
        {},
        h('button', { type: 'button', class: 'link strong', 'aria-pressed': String(asset.uri === selectedAsset), 'data-key': `asset:${asset.uri}`, onclick: () => on.selectAsset(asset.uri) }, asset.name || asset.uri),
        h('br'),
        h('code', { class: 'uri' }, asset.uri),
      ),
      h('td', {}, healthBadge(asset.health)),
      h('td', {}, time(asset.last_event_at, true)),
      h('td', { class: 'num' }, String(asset.event_count ?? '')),
    ),
  );
  return table(['Asset', 'Health', 'Last event', 'Events'], rows, { class: 'list' });
}

export function assetEvents(uri, doc, on, names) {
  if (!uri) return empty('Select an asset to see its events, newest first.');
  const head = h('p', { class: 'asset-head' }, h('strong', {}, names(uri)), ' ', h('code', { class: 'uri', 'data-testid': 'selected-asset' }, uri));
  if (!doc) return [head, empty('Loading…')];
  if (doc.error) return [head, h('p', { class: 'error', role: 'alert' }, `Could not load the events: ${doc.error}`)];
  const items = doc.items || [];
  if (!items.length) return [head, empty('No events yet.')];
  return [head, eventTable(items, on, { names, keyPrefix: 'asset-ev' }), doc.next ? empty(`Showing the newest ${items.length}.`) : null];
}

export function quarantineTable(doc) {
  if (!doc) return empty('Loading…');
  if (doc.error) return h('p', { class: 'error', role: 'alert' }, `Could not load the quarantine: ${doc.error}`);
  const items = doc.items || [];
  if (!items.length) return empty('Nothing quarantined.');
  const rows = items.map((item, i) =>
    h(
      'tr',
      { 'data-testid': 'quarantine-row', 'data-id': item.identity },
      h('td', {}, time(item.at, true)),
      h('td', {}, item.watcher),
      h('td', { class: 'reason', 'data-testid': 'quarantine-reason' }, item.reason),
      h(
        'td',
        { class: 'message' },
        h('div', {}, h('span', { class: 'muted' }, 'body '), jsonDetails(item.body, `q-body:${item.identity || i}`)),
        h('div', {}, h('span', { class: 'muted' }, 'facts '), jsonDetails(item.facts, `q-facts:${item.identity || i}`)),
      ),
    ),
  );
  return [table(['At', 'Watcher', 'Reason', 'Message'], rows, { class: 'list' }), doc.next ? empty(`Showing the newest ${items.length}.`) : null];
}

/** The created event, after "Emit event". */
export function createdEvent(event, on, names) {
  return h(
    'div',
    { class: 'ok', 'data-testid': 'emit-created' },
    'Created event ',
    h('code', { 'data-testid': 'created-event-id' }, event.id),
    ' of ',
    linkButton(names(event.asset), () => on.selectAsset(event.asset, true), { title: event.asset }),
    ' at ',
    time(event.timestamp),
    event.partition_key ? ` (partition ${event.partition_key})` : '',
    h('pre', {}, JSON.stringify(event, null, 2)),
  );
}
