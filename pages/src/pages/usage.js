import { fill, h, rows } from '../dom';
import { amount, duration, isBytes, resourceName, sentence } from '../format';
import { api, xsrf } from '../live';

const PERIODS = { '1d': 'last day', '7d': 'last 7 days', '30d': 'last 30 days' };

const hours = (res, value) => (value === null || value === undefined ? '—' : amount(res, value));
// A time, or a dash where there is none (a team with no wait seen).
export const wait = s => (s === null || s === undefined ? '—' : duration(s));
// A share of capacity: a day of a small demo is well under 1%; a little use must not read as none.
export const share = x => (x > 0 && x < 0.001 ? 'under 0.1%' : `${x < 0.1 ? Math.round(1000 * x) / 10 : Math.round(100 * x)}%`);
// Idle room in the unit people count it in: CPU-hours, GiB-hours, GPU-hours.
export const idle = (res, value) => {
  const text = amount(res, value);
  return isBytes(res) ? `${text}-hours` : `${text} ${resourceName(res)}-hours`;
};

// The Quota page's Usage view: per team and resource over a period, from GET api/v1/usage (the same
// visibility as the API: admins every team, users their own), a CSV of the same rows, and the cluster's totals.
export function usageView(data) {
  const select = document.getElementById('usage-period');
  const link = document.getElementById('usage-csv');
  const none = document.getElementById('usage-none');
  const box = document.getElementById('usage-box');
  const cluster = document.getElementById('usage-cluster');
  let asked = 0;

  function teamRows(t) {
    const res = [...new Set([...Object.keys(t.used_hours || {}), ...Object.keys(t.borrowed_hours || {}),
      ...Object.keys(t.lent_hours || {})])].sort((a, b) => (a !== 'cpu') - (b !== 'cpu') || a.localeCompare(b));
    const list = res.length ? res : [null];
    const span = { rowspan: list.length };
    return list.map((r, i) => h('tr', { 'data-team': t.name, 'data-resource': r || '' },
      i === 0 ? h('th', span, t.name) : null,
      h('td', {}, r ? resourceName(r) : '—'),
      h('td', { class: 'num' }, r ? hours(r, (t.used_hours || {})[r] || 0) : '—'),
      h('td', { class: 'num' }, r && t.borrowed_hours ? hours(r, t.borrowed_hours[r] || 0) : '—'),
      h('td', { class: 'num' }, r && t.lent_hours ? hours(r, t.lent_hours[r] || 0) : '—'),
      i === 0 ? [
        h('td', span, t.below_guarantee_s === null ? '—' : t.below_guarantee_s > 0 ? duration(t.below_guarantee_s) : 'never'),
        h('td', span, wait(t.wait_p50_s)), h('td', span, wait(t.wait_p95_s)),
        h('td', span, String(t.evictions_suffered)), h('td', span, String(t.evictions_caused)),
        h('td', span, String(t.never_started))] : null));
  }

  function clusterSentence(c, words) {
    const parts = Object.keys(c.utilisation || {}).map(r => `${resourceName(r)} ${share(c.utilisation[r])} of capacity used, ` +
      `${idle(r, (c.idle_hours || {})[r] || 0)} idle`);
    return parts.length ? `The whole cluster over the ${words}: ${parts.join('; ')}.` : '';
  }

  async function load() {
    const since = select.value;
    const words = PERIODS[since] || since;
    const mine = (asked += 1);
    link.href = `${data.prefix}api/v1/usage?since=${encodeURIComponent(since)}&format=csv&_xsrf=${encodeURIComponent(xsrf())}`;
    fill(none, h('p', {}, `Reading the ${words}…`));
    let report;
    try {
      report = await api(data.prefix, `usage?since=${encodeURIComponent(since)}`);
    } catch (err) {
      if (mine !== asked) return;
      box.hidden = true;
      link.hidden = true;
      fill(cluster);
      fill(none, err.status === 404
        ? h('p', { class: 'notice', id: 'usage-empty' }, `Nothing was recorded in the ${words}.`)
        : h('p', { class: 'notice bad', role: 'alert' }, `The usage could not be read: ${sentence(err.message)}`));
      return;
    }
    if (mine !== asked) return; // a later choice of period answered first
    const teams = report.teams || [];
    box.hidden = !teams.length;
    link.hidden = false;
    fill(none, teams.length ? null : h('p', { class: 'notice', id: 'usage-empty' },
      data.admin ? `Nothing was recorded in the ${words}.` : `Nothing of your teams was recorded in the ${words}.`));
    rows(document.getElementById('usage'), teams.flatMap(teamRows));
    cluster.textContent = clusterSentence(report.cluster || {}, words);
    document.getElementById('usage-view').dataset.since = since;
  }

  select.addEventListener('change', load);
  load();
}
