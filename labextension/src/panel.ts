/**
 * The sidebar panel: the team's quota path to the root with bars, my notebooks and jobs
 * (state, the reason in plain words, queue position, start, duration; logs, cancel and
 * "why is it waiting" per job), notices about stopped servers, and a form to submit a job.
 */

import { Widget } from '@lumino/widgets';

import { h } from './dom';
import {
  amount,
  barText,
  clock,
  elapsed,
  evictions,
  plainReason,
  positionText,
  resourceName,
  noticeText,
  serverLabel,
  startedAt,
  stateWord,
  timeOfDay
} from './format';
import { TenancyModel } from './model';
import { requestAPI } from './request';
import { SubmitForm } from './submit';
import { FINAL, INotice, IQuotaNode, IResourceBar, IWorkload } from './types';

export interface IPanelActions {
  openLogs(w: IWorkload): void;
  saveAll(): Promise<void>;
  dismissNotice(n: INotice): Promise<void>;
}

/** How many finished workloads stay listed under the active ones. */
const RECENT = 8;

export class TenancyPanel extends Widget {
  constructor(private model: TenancyModel, private actions: IPanelActions) {
    super();
    this.id = 'jp-tenancy-panel';
    this.addClass('jp-TenancyPanel');
    this.title.caption = 'Team quota and my jobs';
    this.title.label = 'Quota';
    this._form = new SubmitForm(model, w => model.update(w));
    this.node.append(
      h('header', { class: 'jp-TenancyPanel-header' }, h('h2', {}, 'Team quota')),
      this._status,
      this._evicting,
      this._notices,
      this._quota,
      h('h3', {}, 'My notebooks and jobs'),
      this._work,
      h('h3', {}, 'Submit a training job'),
      this._form.node
    );
    model.changed.connect(() => this.render());
    this._timer = window.setInterval(() => this.tick(), 1000);
    this.render();
  }

  dispose(): void {
    window.clearInterval(this._timer);
    super.dispose();
  }

  /** Every second: the countdown; every ten: the durations (re-rendering the list less often keeps clicks steady). */
  private tick(): void {
    this.renderEvicting();
    if (++this._ticks % 10 === 0 && this.isVisible) {
      this.renderWork();
    }
  }

  render(): void {
    const s = this.model.snapshot;
    this._status.replaceChildren();
    if (!s) {
      this._status.append(h('p', { class: 'jp-TenancyPanel-message' }, 'Connecting to the tenancy scheduler…'));
    } else if (!s.ok || !s.available) {
      this._status.append(h('p', { class: 'jp-TenancyPanel-message', role: 'status' }, s.message ?? ''));
    }
    this.renderEvicting();
    this.renderNotices();
    this.renderQuota();
    this.renderWork();
    this._form.render();
  }

  private renderEvicting(): void {
    const now = Date.now() / 1000;
    const list = evictions(this.model.snapshot, now);
    this._evicting.replaceChildren();
    const mine = this.model.snapshot?.server?.workloadId;
    for (const { workload: w, remaining } of list) {
      const here = w.id === mine;
      this._evicting.append(
        h(
          'div',
          { class: 'jp-TenancyPanel-evicting', role: 'alert' },
          h('strong', { class: 'jp-TenancyPanel-countdown' }, clock(remaining)),
          ` ${here ? 'This server' : serverLabel(w.serverName)} will be stopped to make room. `,
          w.evictionMessage ?? '',
          here ? h('button', { class: 'jp-mod-styled jp-mod-accept', onclick: () => this.actions.saveAll() }, 'Save all now') : null
        )
      );
    }
  }

  private renderNotices(): void {
    this._notices.replaceChildren();
    for (const n of this.model.snapshot?.notices ?? []) {
      this._notices.append(
        h(
          'div',
          { class: 'jp-TenancyPanel-notice' },
          noticeText(n),
          h('button', { class: 'jp-mod-styled', onclick: () => this.actions.dismissNotice(n) }, 'Dismiss')
        )
      );
    }
  }

  private renderQuota(): void {
    const s = this.model.snapshot;
    this._quota.replaceChildren();
    if (!s?.ok) {
      return;
    }
    if (!s.tenant) {
      this._quota.append(h('p', {}, 'You are in no team yet: ask an admin to add you to one.'));
      return;
    }
    this._quota.append(
      h('p', { class: 'jp-TenancyPanel-team' }, `Team ${s.tenant.group}, namespace ${s.tenant.namespace}`)
    );
    (s.path ?? []).forEach((node, i) => this._quota.append(nodeView(node, i === 0)));
    this._quota.append(
      h(
        'p',
        { class: 'jp-TenancyPanel-legend' },
        h('span', { class: 'jp-TenancyBar-swatch jp-mod-used' }),
        ' used within the guarantee ',
        h('span', { class: 'jp-TenancyBar-swatch jp-mod-borrowed' }),
        ' borrowed (may be taken back) ',
        h('span', { class: 'jp-TenancyBar-swatch jp-mod-min' }),
        ' guarantee'
      )
    );
  }

  private renderWork(): void {
    const s = this.model.snapshot;
    this._work.replaceChildren();
    if (!s?.ok) {
      return;
    }
    const all = s.workloads ?? [];
    const active = all.filter(w => !FINAL.includes(w.state));
    const done = all.filter(w => FINAL.includes(w.state)).slice(0, RECENT);
    if (!active.length && !done.length) {
      this._work.append(h('p', {}, 'Nothing yet: your notebooks and jobs will be listed here.'));
      return;
    }
    const now = Date.now() / 1000;
    for (const w of [...active, ...done]) {
      this._work.append(this.workRow(w, now));
    }
  }

  private workRow(w: IWorkload, now: number): HTMLElement {
    // A notebook being evicted is not waiting for anything: it is counting down to its stop.
    const stopping = typeof w.evictionDeadline === 'number' && !FINAL.includes(w.state);
    const start = startedAt(w);
    const facts = [
      w.kind === 'notebook' ? `notebook${w.serverName ? ` "${w.serverName}"` : ''}` : 'training job',
      w.priorityClassName ?? '',
      stopping ? '' : positionText(w),
      start ? `started ${timeOfDay(start)}` : '',
      elapsed(w, now)
    ].filter(Boolean);
    const buttons: HTMLElement[] = [];
    if (w.kind === 'training') {
      buttons.push(h('button', { class: 'jp-mod-styled', onclick: () => this.actions.openLogs(w) }, 'Logs'));
    }
    if (w.state === 'Pending' && !stopping) {
      buttons.push(h('button', { class: 'jp-mod-styled', onclick: () => this.why(w) }, 'Why is it waiting?'));
    }
    if (w.kind === 'training' && !FINAL.includes(w.state)) {
      buttons.push(h('button', { class: 'jp-mod-styled jp-mod-warn', onclick: () => this.cancel(w) }, 'Cancel'));
    }
    const reason = stopping
      ? `Being stopped to make room: ${w.evictionMessage ?? ''}`
      : w.state === 'Succeeded'
        ? ''
        : plainReason(w);
    return h(
      'div',
      { class: 'jp-TenancyWork', 'data-id': w.id, 'data-state': w.state },
      h(
        'div',
        { class: 'jp-TenancyWork-title' },
        h('span', { class: 'jp-TenancyWork-name' }, w.name),
        h(
          'span',
          { class: 'jp-TenancyWork-state', 'data-state': stopping ? 'Stopping' : w.state },
          stopping ? 'stopping' : stateWord(w.state)
        )
      ),
      h('div', { class: 'jp-TenancyWork-facts' }, facts.join(' · ')),
      reason ? h('div', { class: 'jp-TenancyWork-reason' }, reason) : null,
      // an explanation belongs to the state it explained: gone once the job moved on
      this._why.get(w.id)?.state === w.state
        ? h('div', { class: 'jp-TenancyWork-why' }, this._why.get(w.id)?.text ?? '')
        : null,
      buttons.length ? h('div', { class: 'jp-TenancyWork-actions' }, ...buttons) : null
    );
  }

  private async why(w: IWorkload): Promise<void> {
    try {
      const full = await requestAPI<IWorkload>(`workloads/${w.id}`);
      const events = (full.events ?? []).slice(-4).map(e => `${timeOfDay(e.time)} ${e.message}`);
      const where = positionText(full);
      this._why.set(w.id, {
        state: w.state,
        text: [
          plainReason(full) || 'The scheduler has not decided yet.',
          where ? `It is at ${where}: work ahead of it starts first.` : '',
          ...events
        ]
          .filter(Boolean)
          .join('\n')
      });
    } catch (err) {
      this._why.set(w.id, { state: w.state, text: (err as Error).message });
    }
    this.renderWork();
  }

  private async cancel(w: IWorkload): Promise<void> {
    try {
      this.model.update(await requestAPI<IWorkload>(`workloads/${w.id}`, { method: 'DELETE' }));
    } catch (err) {
      this._why.set(w.id, { state: w.state, text: `It could not be cancelled: ${(err as Error).message}` });
      this.renderWork();
    }
  }

  private _status = h('div', { class: 'jp-TenancyPanel-status' });
  private _evicting = h('div', {});
  private _notices = h('div', {});
  private _quota = h('div', { class: 'jp-TenancyPanel-quota' });
  private _work = h('div', { class: 'jp-TenancyPanel-work' });
  private _form: SubmitForm;
  private _why = new Map<string, { state: string; text: string }>();
  private _timer: number;
  private _ticks = 0;
}

function nodeView(node: IQuotaNode, leaf: boolean): HTMLElement {
  return h(
    'div',
    { class: 'jp-TenancyNode', 'data-node': node.name },
    h('div', { class: 'jp-TenancyNode-name' }, leaf ? `${node.name} (your team)` : node.name),
    ...node.resources.map(bar => barView(bar))
  );
}

/** One bar: the track is the ceiling; the guarantee is a mark; above it, usage is borrowed. */
function barView(bar: IResourceBar): HTMLElement {
  const scale = Math.max(bar.max ?? 0, bar.used, bar.min) || 1;
  const pct = (v: number) => `${Math.min(100, (v / scale) * 100)}%`;
  const within = Math.min(bar.used, bar.min);
  const track = h(
    'div',
    {
      class: 'jp-TenancyBar-track',
      title: `${resourceName(bar.resource)}: ${amount(bar.resource, bar.used)} used, ${amount(bar.resource, bar.min)} guaranteed${
        bar.max !== null ? `, at most ${amount(bar.resource, bar.max)}` : ''
      }`
    },
    h('div', { class: 'jp-TenancyBar-used', style: `width: ${pct(within)}` }),
    bar.borrowed > 0
      ? h('div', { class: 'jp-TenancyBar-borrowed', style: `left: ${pct(bar.min)}; width: ${pct(bar.borrowed)}` })
      : null,
    h('div', { class: 'jp-TenancyBar-min', style: `left: ${pct(bar.min)}` })
  );
  return h(
    'div',
    { class: 'jp-TenancyBar', 'data-resource': bar.resource, 'data-at-max': bar.atMax ? 'true' : 'false' },
    h('div', { class: 'jp-TenancyBar-label' }, barText(bar)),
    track
  );
}
