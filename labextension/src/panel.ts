/**
 * The sidebar panel: the team's quota path to the root with bars, my notebooks and jobs
 * (state, the reason in plain words, queue position, start, duration; logs, cancel and
 * "why is it waiting" per job, stop for my other servers, each asked first), notices about
 * stopped servers, this server's own end with the way back to the hub home, my teams'
 * datasets (each folder opens in the file browser), and a form to submit a job.
 */

import { Dialog, showDialog } from '@jupyterlab/apputils';
import { TranslationBundle } from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';

import { datasetRows } from './datasets';
import { h } from './dom';
import {
  barSentence,
  elapsed,
  endText,
  evictions,
  glanceText,
  inUse,
  noticeText,
  plainMessage,
  plainReason,
  positionText,
  serverLabel,
  workTitle
} from './format';
import { TenancyModel } from './model';
import { requestAPI } from './request';
import { SubmitForm } from './submit';
import { FINAL, INotice, IQuotaNode, IResourceBar, IWorkload } from './types';
import { amount, countdown, startedAt, stateWord, timeOfDay } from './vocabulary';

export interface IPanelActions {
  openLogs(w: IWorkload): void;
  saveAll(): Promise<void>;
  dismissNotice(n: INotice): Promise<void>;
  /** Show a folder (relative to the server's root) in the file browser. */
  openFolder(path: string): void;
  /** The hub's home page (its servers, start and stop), or null outside a hub. */
  hubHome: string | null;
}

/** How many finished workloads stay listed under the active ones. */
const RECENT = 8;

export class TenancyPanel extends Widget {
  constructor(
    private model: TenancyModel,
    private actions: IPanelActions,
    private trans: TranslationBundle
  ) {
    super();
    this.id = 'jp-tenancy-panel';
    this.addClass('jp-TenancyPanel');
    this.title.caption = trans.__('Team quota and my jobs');
    this.title.label = trans.__('Quota');
    this._form = new SubmitForm(model, w => model.update(w), trans);
    this.node.append(
      h('header', { class: 'jp-TenancyPanel-header' }, h('h2', {}, trans.__('Team quota'))),
      this._status,
      this._evicting,
      this._notices,
      this._quota,
      h('h3', {}, trans.__('My notebooks and jobs')),
      this._work,
      ...(actions.hubHome
        ? [
            h(
              'p',
              { class: 'jp-TenancyPanel-servers' },
              h('a', { href: actions.hubHome, target: '_blank' }, trans.__('Start, stop or delete your servers on the hub home'))
            )
          ]
        : []),
      h('h3', {}, trans.__('Datasets')),
      this._datasets,
      h('h3', {}, trans.__('Submit a training job')),
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
      this._status.append(h('p', { class: 'jp-TenancyPanel-message' }, this.trans.__('Connecting to the tenancy scheduler…')));
    } else if ((!s.ok || !s.available) && !this.model.end) {
      this._status.append(h('p', { class: 'jp-TenancyPanel-message', role: 'status' }, s.message ?? ''));
    }
    this.renderEvicting();
    this.renderNotices();
    this.renderQuota();
    this.renderWork();
    this.renderDatasets();
    this._form.render();
  }

  private renderDatasets(): void {
    const s = this.model.snapshot;
    const trans = this.trans;
    this._datasets.replaceChildren();
    if (!s?.ok) {
      return;
    }
    const rows = datasetRows(s, trans);
    if (!rows.length) {
      this._datasets.append(h('p', {}, trans.__('No dataset is declared for your teams.')));
      return;
    }
    for (const d of rows) {
      const where = d.browse !== null
        ? h(
            'a',
            {
              class: 'jp-TenancyDataset-path',
              href: '#',
              title: trans.__('Open %1 in the file browser', d.path),
              onclick: (ev: Event) => {
                ev.preventDefault();
                this.actions.openFolder(d.browse as string);
              }
            },
            // as the file browser names it; the full path is the link's title
            `${d.browse}/`
          )
        : h('code', { class: 'jp-TenancyDataset-path' }, d.path);
      this._datasets.append(
        h(
          'div',
          { class: 'jp-TenancyDataset', 'data-dataset': d.name, 'data-state': d.state },
          h(
            'div',
            { class: 'jp-TenancyWork-title' },
            h(
              'span',
              { class: 'jp-TenancyDataset-head' },
              h('span', { class: 'jp-TenancyDataset-name' }, d.name),
              h('span', { class: `jp-TenancyDataset-access${d.access === trans.__('read-only') ? ' jp-mod-readonly' : ''}` }, d.access)
            ),
            h('span', { class: 'jp-TenancyDataset-state', 'data-state': d.state }, d.stateText)
          ),
          d.description ? h('div', { class: 'jp-TenancyDataset-description' }, d.description) : null,
          h('div', { class: 'jp-TenancyWork-facts' }, where),
          d.hint ? h('div', { class: 'jp-TenancyWork-reason' }, d.hint) : null
        )
      );
    }
  }

  private renderEvicting(): void {
    const now = Date.now() / 1000;
    const list = evictions(this.model.snapshot, now);
    this._evicting.replaceChildren();
    const mine = this.model.snapshot?.server?.workloadId;
    const trans = this.trans;
    const end = this.model.end;
    if (end) {
      this._evicting.append(
        h(
          'div',
          { class: 'jp-TenancyPanel-evicting jp-TenancyPanel-ended', role: 'alert', 'data-phase': end.phase },
          endText(end, this.model.snapshot, trans),
          this.actions.hubHome && end.phase === 'stopped'
            ? h('a', { class: 'jp-TenancyPanel-home jp-mod-styled jp-mod-accept', href: this.actions.hubHome }, trans.__('Go to the hub home'))
            : null
        )
      );
    }
    for (const { workload: w, remaining } of list) {
      if (end && w.id === mine) {
        continue;
      }
      const here = w.id === mine;
      const server = here ? trans.__('This server') : serverLabel(w.serverName, trans, true);
      this._evicting.append(
        h(
          'div',
          { class: 'jp-TenancyPanel-evicting', role: 'alert' },
          h('strong', { class: 'jp-TenancyPanel-countdown' }, countdown(remaining)),
          ` ${trans.__('%1 will be stopped to make room.', server)} `,
          w.evictionMessage ?? '',
          here
            ? h('button', { class: 'jp-mod-styled jp-mod-accept', onclick: () => this.actions.saveAll() }, trans.__('Save all now'))
            : null
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
          noticeText(n, this.trans, this.model.snapshot),
          h('button', { class: 'jp-mod-styled', onclick: () => this.actions.dismissNotice(n) }, this.trans.__('Dismiss'))
        )
      );
    }
  }

  private renderQuota(): void {
    const s = this.model.snapshot;
    const trans = this.trans;
    this._quota.replaceChildren();
    if (!s?.ok) {
      return;
    }
    if (!s.tenant) {
      this._quota.append(h('p', {}, trans.__('You are in no team yet: ask an admin to add you to one.')));
      return;
    }
    this._quota.append(
      h('p', { class: 'jp-TenancyPanel-team' }, trans.__('Team %1, namespace %2', s.tenant.group, s.tenant.namespace))
    );
    (s.path ?? []).forEach((node, i) => this._quota.append(nodeView(node, i === 0, s.workloads, trans)));
    this._quota.append(
      h(
        'p',
        { class: 'jp-TenancyPanel-legend' },
        h('span', { class: 'jp-TenancyBar-swatch jp-mod-used' }),
        ` ${trans.__('used within the guarantee')} `,
        h('span', { class: 'jp-TenancyBar-swatch jp-mod-borrowed' }),
        ` ${trans.__('borrowed (may be taken back)')} `,
        h('span', { class: 'jp-TenancyBar-swatch jp-mod-min' }),
        ` ${trans.__('guarantee')}`
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
      this._work.append(h('p', {}, this.trans.__('Nothing yet: your notebooks and jobs will be listed here.')));
      return;
    }
    const now = Date.now() / 1000;
    for (const w of [...active, ...done]) {
      this._work.append(this.workRow(w, now));
    }
  }

  private workRow(w: IWorkload, now: number): HTMLElement {
    // A notebook being evicted is not waiting for anything: it is counting down to its stop.
    const trans = this.trans;
    const stopping = typeof w.evictionDeadline === 'number' && !FINAL.includes(w.state);
    const start = startedAt(w);
    const here = this.model.snapshot?.server?.workloadId;
    const kind = w.kind !== 'notebook' ? trans.__('training job') : trans.__('notebook');
    const facts = [
      kind,
      w.priorityClassName ?? '',
      stopping ? '' : positionText(w, trans),
      start ? trans.__('started %1', timeOfDay(start)) : '',
      elapsed(w, now, trans)
    ].filter(Boolean);
    const buttons: HTMLElement[] = [];
    if (w.kind === 'training') {
      buttons.push(h('button', { class: 'jp-mod-styled', onclick: () => this.actions.openLogs(w) }, trans.__('Logs')));
    }
    if (w.state === 'Pending' && !stopping) {
      buttons.push(h('button', { class: 'jp-mod-styled', onclick: () => this.why(w) }, trans.__('Why is it waiting?')));
    }
    if (!FINAL.includes(w.state) && (w.kind !== 'notebook' || (w.id !== here && !stopping))) {
      // This server stops from JupyterLab's own File menu; a server being stopped needs no button.
      const label = w.kind === 'notebook' ? trans.__('Stop') : trans.__('Cancel');
      buttons.push(h('button', { class: 'jp-mod-styled jp-mod-warn', onclick: () => this.cancel(w) }, label));
    }
    const s = this.model.snapshot;
    const reason = stopping
      ? trans.__('Being stopped to make room: %1', plainMessage(w.evictionMessage ?? '', s, trans))
      : w.state === 'Succeeded'
        ? ''
        : plainMessage(plainReason(w, trans), s, trans);
    return h(
      'div',
      { class: 'jp-TenancyWork', 'data-id': w.id, 'data-state': w.state },
      h(
        'div',
        { class: 'jp-TenancyWork-title' },
        h('span', { class: 'jp-TenancyWork-name', title: w.name }, workTitle(w, here, trans)),
        h(
          'span',
          { class: 'jp-TenancyWork-state', 'data-state': stopping ? 'Stopping' : w.state },
          stopping ? trans.__('stopping') : stateWord(w.state, w.reason, trans)
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
      const full = await requestAPI<IWorkload>(`workloads/${w.id}`, {}, false, this.trans);
      const events = (full.events ?? []).slice(-4).map(e => `${timeOfDay(e.time)} ${e.message}`);
      const where = positionText(full, this.trans);
      this._why.set(w.id, {
        state: w.state,
        text: [
          plainReason(full, this.trans) || this.trans.__('The scheduler has not decided yet.'),
          where ? this.trans.__('It is at %1: work ahead of it starts first.', where) : '',
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

  /** Cancel a job or stop a server of mine, once the person said yes (a destructive action). */
  private async cancel(w: IWorkload): Promise<void> {
    const trans = this.trans;
    const notebook = w.kind === 'notebook';
    const answer = await showDialog({
      title: notebook ? trans.__('Stop %1?', serverLabel(w.serverName, trans)) : trans.__('Cancel the job "%1"?', w.name),
      body: notebook
        ? w.state === 'Pending'
          ? trans.__('It is waiting for room to start: it leaves the queue.')
          : trans.__('Its programs stop and unsaved changes in it are lost. Your files are kept.')
        : w.state === 'Pending'
          ? trans.__('It leaves the queue and will not run.')
          : trans.__('Its programs are stopped now. What it wrote so far stays in its logs.'),
      buttons: [
        Dialog.cancelButton({ label: notebook ? trans.__('Keep it') : trans.__('Keep the job') }),
        Dialog.warnButton({ label: notebook ? trans.__('Stop the server') : trans.__('Cancel the job') })
      ]
    });
    if (!answer.button.accept) {
      return;
    }
    try {
      this.model.update(await requestAPI<IWorkload>(`workloads/${w.id}`, { method: 'DELETE' }, false, this.trans));
    } catch (err) {
      const text = notebook
        ? trans.__('It could not be stopped: %1', (err as Error).message)
        : trans.__('It could not be cancelled: %1', (err as Error).message);
      this._why.set(w.id, { state: w.state, text });
      this.renderWork();
    }
  }

  private _status = h('div', { class: 'jp-TenancyPanel-status' });
  private _evicting = h('div', {});
  private _notices = h('div', {});
  private _quota = h('div', { class: 'jp-TenancyPanel-quota' });
  private _work = h('div', { class: 'jp-TenancyPanel-work' });
  private _datasets = h('div', { class: 'jp-TenancyPanel-datasets' });
  private _form: SubmitForm;
  private _why = new Map<string, { state: string; text: string }>();
  private _timer: number;
  private _ticks = 0;
}

function nodeView(node: IQuotaNode, leaf: boolean, workloads: IWorkload[] | undefined, trans: TranslationBundle): HTMLElement {
  return h(
    'div',
    { class: 'jp-TenancyNode', 'data-node': node.name },
    h('div', { class: 'jp-TenancyNode-name' }, leaf ? trans.__('%1 (your team)', node.name) : node.name),
    // my queued work's booked room is not in use (the status bar reads the same numbers)
    ...node.resources.map(bar => barView(inUse(bar, workloads), trans))
  );
}

/** One bar: the track is the ceiling; the guarantee is a mark; above it, usage is borrowed. */
function barView(bar: IResourceBar, trans: TranslationBundle): HTMLElement {
  const scale = Math.max(bar.max ?? 0, bar.used, bar.min) || 1;
  const pct = (v: number) => `${Math.min(100, (v / scale) * 100)}%`;
  const within = Math.min(bar.used, bar.min);
  const borrowed = Math.max(0, bar.used - bar.min);
  const track = h(
    'div',
    { class: 'jp-TenancyBar-track', title: barSentence(bar, trans) },
    h('div', { class: 'jp-TenancyBar-used', style: `width: ${pct(within)}` }),
    borrowed > 0
      ? h('div', { class: 'jp-TenancyBar-borrowed', style: `left: ${pct(bar.min)}; width: ${pct(borrowed)}` })
      : null,
    h('div', { class: 'jp-TenancyBar-min', style: `left: ${pct(bar.min)}` })
  );
  const ceiling = bar.max !== null ? ` ${trans.__('(at most %1)', amount(bar.resource, bar.max, trans))}` : '';
  return h(
    'div',
    { class: 'jp-TenancyBar', 'data-resource': bar.resource, 'data-at-max': bar.atMax ? 'true' : 'false' },
    h('div', { class: 'jp-TenancyBar-label' }, glanceText(bar, trans) + ceiling),
    track
  );
}
