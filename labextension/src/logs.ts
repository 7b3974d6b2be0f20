/** A job's logs in the main area: the tail, following while the job runs. */

import { MainAreaWidget } from '@jupyterlab/apputils';
import { TranslationBundle } from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';

import { h } from './dom';
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
      const atEnd = this.node.scrollTop + this.node.clientHeight >= this.node.scrollHeight - 20;
      this._pre.textContent = tail(text) || this.trans.__('(no output yet)');
      if (atEnd) {
        this.node.scrollTop = this.node.scrollHeight;
      }
      const word = stateWord(state, null, this.trans);
      this._status.textContent = FINAL.includes(state)
        ? this.trans.__('%1 is %2; its output is complete.', this.workload.name, word)
        : this.trans.__('%1 is %2; following its output…', this.workload.name, word);
    } catch (err) {
      this._status.textContent = (err as Error).message;
    }
    if (!FINAL.includes(state)) {
      window.setTimeout(() => this.read(), FOLLOW_MS);
    }
  }

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
