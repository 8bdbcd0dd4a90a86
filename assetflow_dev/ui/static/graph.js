// The asset graph of the compiled catalog (watchers → assets → pipelines → outlet assets), drawn as SVG
// with a layered left-to-right layout.

import { s } from './dom.js';

const NODE_W = 168;
const NODE_H = 46;
const GAP_X = 64;
const GAP_Y = 16;
const PAD = 16;
const SWEEPS = 6;

/** Every asset URI and alias name a catalog condition names, whatever the node types (future ones too). */
export function conditionRefs(condition, found = { uris: new Set(), aliases: new Set() }) {
  if (Array.isArray(condition)) {
    for (const item of condition) conditionRefs(item, found);
  } else if (condition && typeof condition === 'object') {
    if (condition.type === 'alias' && typeof condition.name === 'string') found.aliases.add(condition.name);
    if (typeof condition.uri === 'string') found.uris.add(condition.uri);
    for (const [key, value] of Object.entries(condition)) {
      if (key !== 'uri' && value && typeof value === 'object') conditionRefs(value, found);
    }
  }
  return found;
}

/** Nodes (`w:`, `a:`, `l:`, `p:` ids) and edges of a catalog document. */
export function buildGraph(catalog) {
  const nodes = new Map();
  const edges = [];
  const seen = new Set();
  const add = (id, node) => {
    if (!nodes.has(id)) nodes.set(id, { id, ...node });
    return id;
  };
  const asset = (uri) => add(`a:${uri}`, { kind: 'asset', key: uri, label: catalog.assets?.[uri]?.name || uri, sub: uri });
  const alias = (name) => add(`l:${name}`, { kind: 'alias', key: name, label: name, sub: 'alias' });
  const edge = (from, to) => {
    const id = `${from}→${to}`;
    if (!seen.has(id)) {
      seen.add(id);
      edges.push({ from, to });
    }
  };
  for (const uri of Object.keys(catalog.assets || {}).sort()) asset(uri);
  for (const name of Object.keys(catalog.aliases || {}).sort()) alias(name);
  for (const [name, watcher] of Object.entries(catalog.watchers || {})) {
    const source = watcher.source || {};
    const where = source.queue || source.topic || source.stream || source.bucket || source.bus || source.queue_arn || '';
    const id = add(`w:${name}`, { kind: 'watcher', key: name, label: name, sub: [source.type, where].filter(Boolean).join(': ') });
    // One watcher may feed several assets (the catalog lists them all in `assets`).
    for (const uri of watcher.assets || (watcher.asset ? [watcher.asset] : [])) edge(id, asset(uri));
  }
  for (const id of Object.keys(catalog.pipelines || {}).sort()) {
    const pipeline = catalog.pipelines[id];
    const node = add(`p:${id}`, { kind: 'pipeline', key: id, label: id, sub: '' });
    const refs = conditionRefs(pipeline.schedule?.condition);
    for (const uri of refs.uris) edge(asset(uri), node);
    for (const name of refs.aliases) edge(alias(name), node);
    for (const outlet of pipeline.outlets || []) {
      if (outlet.type === 'alias' && outlet.name) edge(node, alias(outlet.name));
      else if (outlet.uri) edge(node, asset(outlet.uri));
    }
  }
  return { nodes, edges };
}

/** Layers (longest path from the watchers), then barycentre ordering within each layer. */
export function layout(graph) {
  const preds = new Map([...graph.nodes.keys()].map((id) => [id, []]));
  const succs = new Map([...graph.nodes.keys()].map((id) => [id, []]));
  for (const { from, to } of graph.edges) {
    succs.get(from).push(to);
    preds.get(to).push(from);
  }
  const hasWatchers = [...graph.nodes.values()].some((n) => n.kind === 'watcher');
  const base = (id) => (graph.nodes.get(id).kind === 'watcher' || !hasWatchers ? 0 : 1);

  // Kahn's order; a cycle (which `assetflow validate` refuses) only loses its back edges here.
  const indegree = new Map([...preds].map(([id, p]) => [id, p.length]));
  const order = [...graph.nodes.keys()].filter((id) => indegree.get(id) === 0);
  for (let i = 0; i < order.length; i += 1) {
    for (const next of succs.get(order[i])) {
      indegree.set(next, indegree.get(next) - 1);
      if (indegree.get(next) === 0) order.push(next);
    }
  }
  for (const id of graph.nodes.keys()) if (!order.includes(id)) order.push(id);

  const layer = new Map();
  for (const id of order) {
    const from = preds.get(id).filter((p) => layer.has(p)).map((p) => layer.get(p) + 1);
    layer.set(id, Math.max(base(id), ...from));
  }
  // An input nothing produces sits just left of its first consumer rather than far away at the start.
  for (const id of order) {
    if (preds.get(id).length === 0 && succs.get(id).length > 0 && graph.nodes.get(id).kind !== 'watcher') {
      layer.set(id, Math.max(base(id), Math.min(...succs.get(id).map((n) => layer.get(n))) - 1));
    }
  }

  const layers = [];
  for (const id of order) {
    const l = layer.get(id);
    (layers[l] ||= []).push(id);
  }
  for (let i = 0; i < layers.length; i += 1) layers[i] ||= [];

  const position = new Map();
  const place = () => layers.forEach((ids) => ids.forEach((id, i) => position.set(id, (i + 0.5) / ids.length)));
  place();
  const centre = (id, neighbours) => {
    const known = neighbours.map((n) => position.get(n)).filter((v) => v !== undefined);
    return known.length ? known.reduce((a, b) => a + b, 0) / known.length : position.get(id);
  };
  for (let sweep = 0; sweep < SWEEPS; sweep += 1) {
    const forward = sweep % 2 === 0;
    const sequence = forward ? layers.keys() : [...layers.keys()].reverse();
    for (const l of sequence) {
      const score = new Map(layers[l].map((id) => [id, centre(id, forward ? preds.get(id) : succs.get(id))]));
      layers[l].sort((a, b) => score.get(a) - score.get(b) || a.localeCompare(b));
      layers[l].forEach((id, i) => position.set(id, (i + 0.5) / layers[l].length));
    }
  }

  const tallest = Math.max(1, ...layers.map((ids) => ids.length));
  const height = PAD * 2 + tallest * NODE_H + (tallest - 1) * GAP_Y;
  const width = PAD * 2 + layers.length * NODE_W + Math.max(0, layers.length - 1) * GAP_X;
  const boxes = new Map();
  layers.forEach((ids, l) => {
    const column = ids.length * NODE_H + (ids.length - 1) * GAP_Y;
    const top = (height - column) / 2;
    ids.forEach((id, i) => {
      boxes.set(id, { x: PAD + l * (NODE_W + GAP_X), y: top + i * (NODE_H + GAP_Y), w: NODE_W, h: NODE_H });
    });
  });
  return { boxes, width, height };
}

function clip(text, max) {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

function shape(kind, box) {
  const { x, y, w, h } = box;
  if (kind === 'watcher') {
    const k = 10;
    return s('polygon', { class: 'shape', points: `${x + k},${y} ${x + w},${y} ${x + w - k},${y + h} ${x},${y + h}` });
  }
  if (kind === 'pipeline') {
    const k = 12;
    const pts = [[x + k, y], [x + w - k, y], [x + w, y + h / 2], [x + w - k, y + h], [x + k, y + h], [x, y + h / 2]];
    return s('polygon', { class: 'shape', points: pts.map((p) => p.join(',')).join(' ') });
  }
  return s('rect', { class: 'shape', x, y, width: w, height: h, rx: kind === 'alias' ? 16 : 6 });
}

/**
 * The graph as an SVG element.
 * @param {object} catalog the `GET /catalog` document
 * @param {object} look `status(node)` → `{cls, text, label}`, `selected(node)` → bool, `onSelect(node)`
 */
export function renderGraph(catalog, look) {
  const graph = buildGraph(catalog);
  const { boxes, width, height } = layout(graph);
  const root = s('svg', {
    class: 'graph-svg',
    viewBox: `0 0 ${width} ${height}`,
    width,
    height,
    role: 'group',
    'aria-label': 'Asset graph: watchers, assets, pipelines and their outlets',
    'data-testid': 'graph-svg',
  });
  root.append(
    s(
      'defs',
      {},
      s(
        'marker',
        { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
        s('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead' }),
      ),
    ),
  );
  const selectedIds = new Set([...graph.nodes.values()].filter((n) => look.selected(n)).map((n) => n.id));
  const edgeLayer = s('g', { class: 'edges' });
  for (const { from, to } of graph.edges) {
    const a = boxes.get(from);
    const b = boxes.get(to);
    const x1 = a.x + a.w;
    const y1 = a.y + a.h / 2;
    const x2 = b.x;
    const y2 = b.y + b.h / 2;
    const dx = Math.max(24, (x2 - x1) / 2);
    const hot = selectedIds.has(from) || selectedIds.has(to);
    edgeLayer.append(
      s('path', {
        class: hot ? 'edge hot' : 'edge',
        d: `M${x1},${y1} C${x1 + dx},${y1} ${x2 - dx},${y2} ${x2 - 2},${y2}`,
        'marker-end': 'url(#arrow)',
        'data-testid': 'graph-edge',
        'data-from': from,
        'data-to': to,
      }),
    );
  }
  root.append(edgeLayer);
  const nodeLayer = s('g', { class: 'nodes' });
  for (const node of graph.nodes.values()) {
    const box = boxes.get(node.id);
    const status = look.status(node) || {};
    const sub = status.text || node.sub;
    const interactive = node.kind === 'pipeline' || node.kind === 'asset';
    const label = `${node.kind} ${node.label}${node.kind === 'asset' ? ` (${node.key})` : ''}${status.label ? `: ${status.label}` : ''}`;
    const group = s(
      'g',
      {
        class: ['node', node.kind, status.cls, selectedIds.has(node.id) ? 'selected' : ''].filter(Boolean).join(' '),
        'data-testid': 'graph-node',
        'data-kind': node.kind,
        'data-id': node.key,
        'data-key': `node:${node.id}`,
        role: interactive ? 'button' : 'img',
        tabindex: interactive ? 0 : null,
        'aria-label': label,
        'aria-pressed': interactive ? String(selectedIds.has(node.id)) : null,
      },
      s('title', {}, `${label}${node.kind === 'watcher' ? ` (${node.sub})` : ''}`),
      shape(node.kind, box),
      s('text', { class: 'label', x: box.x + box.w / 2, y: box.y + 19, 'text-anchor': 'middle' }, clip(node.label, 22)),
      s('text', { class: 'sub', x: box.x + box.w / 2, y: box.y + 35, 'text-anchor': 'middle' }, clip(sub || '', 25)),
    );
    if (interactive) {
      group.addEventListener('click', () => look.onSelect(node));
      group.addEventListener('keydown', (event) => {
        if (event.key === 'Enter' || event.key === ' ') {
          event.preventDefault();
          look.onSelect(node);
        }
      });
    }
    nodeLayer.append(group);
  }
  root.append(nodeLayer);
  return root;
}
