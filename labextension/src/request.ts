/** The one way the page calls its server: `BASE/tenancy/api/...`, with jupyter-server's auth and xsrf. */

import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { plainError } from './format';
import { english, ITrans } from './vocabulary';

export function apiUrl(path: string, settings = ServerConnection.makeSettings()): string {
  return URLExt.join(settings.baseUrl, 'tenancy', 'api', path);
}

/** The answer (JSON, or text with `text`); an Error whose message is a sentence on failure. */
export async function requestAPI<T>(
  path: string,
  init: RequestInit = {},
  text = false,
  trans: ITrans = english
): Promise<T> {
  const settings = ServerConnection.makeSettings();
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(apiUrl(path, settings), init, settings);
  } catch (err) {
    throw new Error(trans.__('Your notebook server could not be reached. Check your connection and try again.'));
  }
  const body = await response.text();
  if (!response.ok) {
    let message = '';
    try {
      message = JSON.parse(body).error || JSON.parse(body).message || '';
    } catch {
      message = '';
    }
    throw new Error(
      message ? plainError(message, response.status, trans) : trans.__('The request failed (HTTP %1). Try again in a moment.', response.status)
    );
  }
  return (text ? body : body ? JSON.parse(body) : null) as T;
}

/**
 * The event stream's URL. EventSource cannot send headers, and JupyterHub's single-user
 * servers check the xsrf token on cookie-authenticated GETs that are not page loads: it
 * goes in the query, from the cookie ServerConnection uses for its header.
 */
export function eventsUrl(settings = ServerConnection.makeSettings()): string {
  const xsrf = document.cookie.match('\\b_xsrf=([^;]*)\\b');
  const url = apiUrl('events', settings);
  return xsrf ? `${url}?_xsrf=${encodeURIComponent(xsrf[1])}` : url;
}
