// The assetflow HTTP API (DESIGN §5), called same-origin with this tab's bearer token.

const TOKEN_KEY = 'assetflow.token';
const TIMEOUT_MS = 15000;
const MAX_PAGES = 20;

/** An answer of the API that is not a success: its status, and the `{error, detail}` it carried. */
export class ApiError extends Error {
  constructor(status, code, detail) {
    super(`${status} ${code}: ${detail}`);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.detail = detail;
  }
}

/** No answer at all: the server is down, the network failed, or the request timed out. */
export class UnreachableError extends Error {
  constructor(detail) {
    super(detail);
    this.name = 'UnreachableError';
  }
}

/**
 * Moves a `#token=...` fragment into session storage and removes it from the address bar.
 * @returns {boolean} whether a token was taken from the fragment.
 */
export function adoptTokenFromFragment() {
  const parts = window.location.hash.replace(/^#/, '').split('&').filter(Boolean);
  const found = parts.find((part) => part.startsWith('token='));
  if (found === undefined) return false;
  // decodeURIComponent, not URLSearchParams: a '+' in a token stays a '+'.
  let token;
  try {
    token = decodeURIComponent(found.slice('token='.length));
  } catch {
    token = found.slice('token='.length);
  }
  if (token) setToken(token);
  const rest = parts.filter((part) => part !== found).join('&');
  const url = window.location.pathname + window.location.search + (rest ? `#${rest}` : '');
  window.history.replaceState(window.history.state, '', url);
  return Boolean(token);
}

export function getToken() {
  try {
    return window.sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

export function setToken(token) {
  window.sessionStorage.setItem(TOKEN_KEY, token);
}

function withQuery(path, query) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== '') params.set(key, String(value));
  }
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

/**
 * One API call. Paths are absolute on this origin (`/assets`, never under `/ui/`).
 * @throws {ApiError} the API answered with an error status.
 * @throws {UnreachableError} no answer.
 */
export async function request(method, path, { query, body } = {}) {
  const headers = { Accept: 'application/json' };
  const token = getToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  const init = { method, headers, cache: 'no-store', credentials: 'same-origin', signal: AbortSignal.timeout(TIMEOUT_MS) };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  let text;
  try {
    response = await fetch(withQuery(path, query), init);
    text = await response.text();
  } catch (err) {
    const why = err && err.name === 'TimeoutError' ? `no answer within ${TIMEOUT_MS / 1000} s` : 'the connection failed';
    throw new UnreachableError(why);
  }
  let doc = null;
  if (text) {
    try {
      doc = JSON.parse(text);
    } catch {
      doc = null;
    }
  }
  if (!response.ok) {
    const code = (doc && doc.error) || (response.status === 401 ? 'unauthorized' : `http_${response.status}`);
    // API Gateway's own errors say {"message": ...}; everything of ours says {"error", "detail"}.
    const detail = (doc && (doc.detail || doc.message)) || text.slice(0, 300) || response.statusText;
    throw new ApiError(response.status, code, String(detail));
  }
  if (text && doc === null) throw new ApiError(response.status, 'bad_response', 'the answer is not JSON');
  return doc;
}

/** Every page of a list, following `next` (at most MAX_PAGES pages). */
async function allPages(path, query) {
  const items = [];
  let next = null;
  for (let page = 0; page < MAX_PAGES; page += 1) {
    const doc = await request('GET', path, { query: { ...query, next } });
    items.push(...(doc.items || []));
    next = doc.next || null;
    if (!next) break;
  }
  return { items, next };
}

const seg = encodeURIComponent;

export const api = {
  catalog: () => request('GET', '/catalog'),
  assets: () => allPages('/assets', { limit: 1000 }),
  assetEvents: (uri, limit) => request('GET', '/assets/events', { query: { uri, limit } }),
  emitEvent: (body) => request('POST', '/assets/events', { body }),
  explain: (id) => request('GET', `/pipelines/${seg(id)}/explain`),
  queue: (id) => request('GET', `/pipelines/${seg(id)}/queue`),
  pipelineRuns: (id, limit) => request('GET', `/pipelines/${seg(id)}/runs`, { query: { limit } }),
  triggerRun: (id, body) => request('POST', `/pipelines/${seg(id)}/runs`, { body }),
  pause: (id) => request('POST', `/pipelines/${seg(id)}/pause`),
  unpause: (id) => request('POST', `/pipelines/${seg(id)}/unpause`),
  runs: (limit) => request('GET', '/runs', { query: { limit } }),
  run: (id) => request('GET', `/runs/${seg(id)}`),
  cancelRun: (id) => request('POST', `/runs/${seg(id)}/cancel`),
  replayRun: (id) => request('POST', `/runs/${seg(id)}/replay`),
  quarantine: (limit) => request('GET', '/quarantine', { query: { limit } }),
};
