/** A job's logs in the main area: the tail, following while the job runs. */

import { MainAreaWidget } from '@jupyterlab/apputils';
import { TranslationBundle } from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';

import { h } from './dom';
import { logStatus } from './format';
import { TenancyModel } from './model';
import { requestAPI } from './request';
import { FINAL, IWorkload } from './types';
import { stateWord } from './vocabulary';

/** Lines kept on screen: the tail of a long log. */
const TAIL = 500;
/** How often an open log of a running job is read again (logs have no event stream). */
const FOLLOW_MS = 2000;

export function tail(text: string, lines = TAIL): string {
  const all = text.split('\n');
  return all.length > lines ? all.slice(-lines).join('\n') : text;
}

class LogView extends Widget {
  constructor(
    private model: TenancyModel,
    private workload: IWorkload,
    private trans: TranslationBundle
  ) {
    super();
    this.addClass('jp-TenancyLogs');
    this.node.append(this._status, this._pre);
    void this.read();
  }

  private state(): string {
    const w = (this.model.snapshot?.workloads ?? []).find(x => x.id === this.workload.id);
    return (w ?? this.workload).state;
  }

  private async read(): Promise<void> {
    if (this.isDisposed) {
      return;
    }
    const state = this.state();
    try {
      const text = await requestAPI<string>(`workloads/${this.workload.id}/logs`, {}, true, this.trans);
      // The latest lines are what people open a log for: at the end when it opens, and kept
      // there while it grows unless they scrolled up to read.
      const atEnd = this._first || this.node.scrollTop + this.node.clientHeight >= this.node.scrollHeight - 20;
      this._pre.textContent = tail(text);
      if (atEnd) {
        this.node.scrollTop = this.node.scrollHeight;
        // again once laid out: a tab opened a moment ago may not have its height yet
        window.requestAnimationFrame(() => (this.node.scrollTop = this.node.scrollHeight));
      }
      this._first = false;
      const word = stateWord(state, null, this.trans);
      this._status.textContent = logStatus(this.workload.name, state, word, text.trim().length > 0, this.trans);
      this._status.dataset.state = state;
    } catch (err) {
      this._status.textContent = (err as Error).message;
    }
    if (!FINAL.includes(state)) {
      window.setTimeout(() => this.read(), FOLLOW_MS);
    }
  }

  private _first = true;
  private _status = h('p', { class: 'jp-TenancyLogs-status' });
  private _pre = h('pre', { class: 'jp-TenancyLogs-text' });
}

export function logsWidget(model: TenancyModel, w: IWorkload, trans: TranslationBundle): MainAreaWidget {
  const widget = new MainAreaWidget({ content: new LogView(model, w, trans) });
  widget.id = `jp-tenancy-logs-${w.id}`;
  widget.title.label = trans.__('Logs: %1', w.name);
  widget.title.closable = true;
  return widget;
}
