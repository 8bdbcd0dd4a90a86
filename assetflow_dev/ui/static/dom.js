// Small DOM helpers: elements are built with text nodes only (never innerHTML), so API data stays data.

const SVG_NS = 'http://www.w3.org/2000/svg';

function fill(el, attrs, children, isSvg) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else if (key === 'class' && !isSvg) {
      el.className = value;
    } else if (value === true) {
      el.setAttribute(key, '');
    } else {
      el.setAttribute(key, String(value));
    }
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** An HTML element: `h('button', {class: 'x', onclick: f}, 'text', child...)`. */
export function h(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children, false);
}

/** An SVG element, same call shape as `h`. */
export function s(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children, true);
}

/**
 * Replaces a region's content only when its data changed, so that a refresh keeps focus, open
 * `<details>` and scroll position; the focused control is found again by its `data-key`.
 */
export function paint(region, data, build) {
  const key = JSON.stringify(data);
  if (region.dataset.painted === key) return false;
  const active = document.activeElement;
  const focusKey = active && region.contains(active) ? active.getAttribute('data-key') : null;
  const open = new Set([...region.querySelectorAll('details[open][data-key]')].map((d) => d.dataset.key));
  region.replaceChildren(...[build()].flat(Infinity).filter(Boolean));
  region.dataset.painted = key;
  for (const details of region.querySelectorAll('details[data-key]')) {
    if (open.has(details.dataset.key)) details.open = true;
  }
  if (focusKey) {
    const again = [...region.querySelectorAll('[data-key]')].find((el) => el.getAttribute('data-key') === focusKey);
    if (again) again.focus({ preventScroll: true });
  }
  return true;
}

/**
 * `2026-11-21 10:15:00Z` for an API timestamp (UTC, as the CLI prints them), `11-21 10:15:00Z` when `short`;
 * the full value on hover.
 */
export function time(iso, short = false) {
  if (!iso) return h('span', { class: 'muted' }, '—');
  let text = String(iso).replace('T', ' ').replace(/\.\d+Z$/, 'Z');
  if (short) text = text.replace(/^\d{4}-/, '');
  return h('time', { datetime: iso, title: iso }, text);
}

export function pretty(value) {
  return JSON.stringify(value, null, 2);
}

/** A collapsed JSON value, or a dash when it is empty. */
export function jsonDetails(value, key, label = 'show') {
  const empty = value === null || value === undefined || (typeof value === 'object' && Object.keys(value).length === 0);
  if (empty) return h('span', { class: 'muted' }, value === null || value === undefined ? '—' : '{}');
  const summary = typeof value === 'string' ? value : JSON.stringify(value);
  return h(
    'details',
    { class: 'json', 'data-key': key },
    h('summary', { title: summary }, summary.length > 48 ? `${summary.slice(0, 45)}…` : summary || label),
    h('pre', {}, typeof value === 'string' ? value : pretty(value)),
  );
}

export function table(headers, rows, attrs = {}) {
  return h(
    'table',
    attrs,
    h('thead', {}, h('tr', {}, headers.map((title) => h('th', { scope: 'col' }, title)))),
    h('tbody', {}, rows),
  );
}

export function empty(text) {
  return h('p', { class: 'empty' }, text);
}

export function errorBox(error, what) {
  const text = error && error.status ? `${error.status} ${error.code}: ${error.detail}` : String(error && error.message);
  return h('p', { class: 'error', role: 'alert' }, what ? `Could not load ${what}: ${text}` : text);
}
