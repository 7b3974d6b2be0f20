/**
 * The submit form: a command or a Python script, resources, a priority class my team may
 * use, the datasets it mounts (none chosen: every ready one of the team). A dry run first: if the
 * job would stop one of my own servers, say which and ask.
 */

import { TranslationBundle } from '@jupyterlab/translation';

import { datasetChoices } from './datasets';
import { h } from './dom';
import { TenancyModel } from './model';
import { requestAPI } from './request';
import { ownVictims, submission } from './submission';
import { IDryRun, IWorkload } from './types';
import { stateWord } from './vocabulary';

export class SubmitForm {
  readonly node: HTMLFormElement;

  constructor(
    private model: TenancyModel,
    private submitted: (w: IWorkload) => void,
    private trans: TranslationBundle
  ) {
    const t = (msgid: string) => trans.__(msgid);
    this._modeCommand = h('input', { type: 'radio', name: 'tenancy-mode', value: 'command', checked: true });
    this._modeScript = h('input', { type: 'radio', name: 'tenancy-mode', value: 'script' });
    this._text = h('textarea', {
      class: 'jp-TenancySubmit-text',
      rows: '3',
      placeholder: 'python train.py --epochs 10',
      'aria-label': t('Command or script')
    });
    this._cpu = h('input', { class: 'jp-TenancySubmit-cpu', value: '1', size: '4', 'aria-label': t('CPU') });
    this._memory = h('input', { class: 'jp-TenancySubmit-memory', placeholder: '1Gi', size: '5', 'aria-label': t('Memory') });
    this._gpu = h('input', { class: 'jp-TenancySubmit-gpu', value: '0', size: '3', 'aria-label': t('GPU') });
    this._replicas = h('input', { class: 'jp-TenancySubmit-replicas', value: '1', size: '3', 'aria-label': t('Replicas') });
    this._tenantRow = h('label', { class: 'jp-TenancySubmit-row' }, t('Team'), this._tenant);
    this._datasets = h('select', { class: 'jp-TenancySubmit-datasets', multiple: true, size: '3', 'aria-label': t('Datasets') });
    this._datasetsRow = h(
      'label',
      { class: 'jp-TenancySubmit-row' },
      t('Datasets (none chosen: every ready one)'),
      this._datasets
    );
    this._name = h('input', { class: 'jp-TenancySubmit-name', placeholder: t('my-job') });
    this._submit = h('button', { type: 'submit', class: 'jp-mod-styled jp-mod-accept' }, t('Submit'));
    this.node = h(
      'form',
      { class: 'jp-TenancySubmit', onsubmit: (ev: Event) => this.onSubmit(ev) },
      h(
        'div',
        { class: 'jp-TenancySubmit-mode' },
        h('label', {}, this._modeCommand, ` ${t('Command')}`),
        h('label', {}, this._modeScript, ` ${t('Python script')}`)
      ),
      this._text,
      h(
        'div',
        { class: 'jp-TenancySubmit-grid' },
        h('label', {}, t('CPU'), this._cpu),
        h('label', {}, t('Memory'), this._memory),
        h('label', {}, t('GPU'), this._gpu),
        h('label', {}, t('Replicas'), this._replicas)
      ),
      h('label', { class: 'jp-TenancySubmit-row' }, t('Priority class'), this._priority),
      this._tenantRow,
      this._datasetsRow,
      h('label', { class: 'jp-TenancySubmit-row' }, t('Name (optional)'), this._name),
      h('div', { class: 'jp-TenancySubmit-actions' }, this._submit),
      this._confirm,
      this._message
    );
  }

  /** The choices that depend on my teams (their priority classes, their datasets). */
  render(): void {
    const s = this.model.snapshot;
    this.renderDatasets();
    const tenants = (s?.tenants ?? []).filter(t => !(t.errors ?? []).length);
    const tenant = tenants.find(t => t.group === this._tenant.value) ?? s?.tenant ?? tenants[0];
    const classes = tenant?.priorityClasses ?? [];
    const key = `${tenants.map(t => t.group).join(',')}|${classes.join(',')}`;
    if (key === this._choices) {
      return;
    }
    this._choices = key;
    const chosen = this._priority.value;
    this._priority.replaceChildren(...classes.map(c => h('option', { value: c }, c)));
    this._priority.value = classes.includes(chosen)
      ? chosen
      : classes.includes('high-priority-research')
        ? 'high-priority-research'
        : (classes[0] ?? '');
    const team = this._tenant.value || s?.tenant?.group || '';
    this._tenant.replaceChildren(...tenants.map(t => h('option', { value: t.group }, t.group)));
    this._tenant.value = team;
    this._tenantRow.style.display = tenants.length > 1 ? '' : 'none';
    this._submit.disabled = !s?.ok || !tenant;
  }

  private renderDatasets(): void {
    const choices = datasetChoices(this.model.snapshot);
    const key = choices.map(c => c.label).join(',');
    if (key === this._datasetChoices) {
      return;
    }
    this._datasetChoices = key;
    const chosen = new Set(Array.from(this._datasets.selectedOptions).map(o => o.value));
    this._datasets.replaceChildren(
      ...choices.map(c => h('option', { value: c.name, selected: chosen.has(c.name) }, c.label))
    );
    this._datasets.size = Math.min(Math.max(choices.length, 2), 5);
    this._datasetsRow.style.display = choices.length ? '' : 'none';
  }

  private values() {
    return {
      mode: (this._modeScript.checked ? 'script' : 'command') as 'command' | 'script',
      text: this._text.value,
      cpu: this._cpu.value,
      memory: this._memory.value,
      gpu: this._gpu.value,
      replicas: this._replicas.value,
      priorityClass: this._priority.value,
      name: this._name.value,
      tenant: this._tenant.value,
      datasets: Array.from(this._datasets.selectedOptions).map(o => o.value)
    };
  }

  private say(text: string, level: 'info' | 'error' = 'info'): void {
    this._message.textContent = text;
    this._message.dataset.level = level;
  }

  private async onSubmit(ev: Event): Promise<void> {
    ev.preventDefault();
    if (!this._text.value.trim()) {
      this.say(
        this._modeScript.checked ? this.trans.__('Write the Python script to run.') : this.trans.__('Write the command to run.'),
        'error'
      );
      return;
    }
    const body = JSON.stringify(submission(this.values()));
    this._confirm.replaceChildren();
    this._submit.disabled = true;
    try {
      const dry = await requestAPI<IDryRun>('workloads?dryRun=true', { method: 'POST', body }, false, this.trans);
      const warning = ownVictims(dry, this.model.snapshot?.user, this.trans);
      if (warning) {
        this.say('');
        this._confirm.append(
          h('p', { role: 'alert' }, warning),
          h('button', { type: 'button', class: 'jp-mod-styled jp-mod-warn', onclick: () => this.send(body) }, this.trans.__('Submit anyway')),
          h('button', { type: 'button', class: 'jp-mod-styled', onclick: () => this._confirm.replaceChildren() }, this.trans.__('Keep my server'))
        );
        return;
      }
      await this.send(body);
    } catch (err) {
      this.say((err as Error).message, 'error');
    } finally {
      this._submit.disabled = false;
    }
  }

  private async send(body: string): Promise<void> {
    this._confirm.replaceChildren();
    try {
      const w = await requestAPI<IWorkload>('workloads', { method: 'POST', body }, false, this.trans);
      this.submitted(w);
      this.say(this.trans.__('Submitted %1: %2.', w.name, stateWord(w.state, w.reason, this.trans)));
    } catch (err) {
      this.say((err as Error).message, 'error');
    }
  }

  private _modeCommand: HTMLInputElement;
  private _modeScript: HTMLInputElement;
  private _text: HTMLTextAreaElement;
  private _cpu: HTMLInputElement;
  private _memory: HTMLInputElement;
  private _gpu: HTMLInputElement;
  private _replicas: HTMLInputElement;
  private _priority = h('select', { class: 'jp-TenancySubmit-priority' });
  private _tenant = h('select', { class: 'jp-TenancySubmit-tenant' });
  private _tenantRow: HTMLLabelElement;
  private _name: HTMLInputElement;
  private _submit: HTMLButtonElement;
  private _confirm = h('div', { class: 'jp-TenancySubmit-confirm' });
  private _message = h('p', { class: 'jp-TenancySubmit-message', role: 'status' });
  private _choices = '';
  private _datasets: HTMLSelectElement;
  private _datasetsRow: HTMLLabelElement;
  private _datasetChoices = '\u0000';
}
