/**
 * The panel's Datasets section, its pure part: what each row says (name, read-only or not, its
 * state in my namespace, where it is) and the choice the submit form offers. Tested by jest; the
 * panel (panel.ts) turns these into elements.
 */

import { IDataset, ISnapshot } from './types';
import { datasetState, english, ITrans } from './vocabulary';

export interface IDatasetRow {
  name: string;
  description: string;
  /** `read-only` or `read and write`. */
  access: string;
  state: string;
  /** The state in words: `ready`, `not ready yet`, `refused`. */
  stateText: string;
  /** Where it is in this server. */
  path: string;
  /** The folder to open in the file browser, or null (then `hint` says why it cannot be opened there). */
  browse: string | null;
  hint: string;
}

export function datasetRows(s: ISnapshot | null, trans: ITrans = english): IDatasetRow[] {
  return (s?.datasets ?? []).map((d: IDataset) => {
    const path = d.path || d.mountPath;
    const browse = d.browse ?? null;
    let hint = '';
    if (d.state !== 'Bound') {
      hint = d.message
        ? trans.__('Not ready in your namespace: %1. Jobs that name it wait until it is.', d.message)
        : trans.__('Not ready in your namespace yet: jobs that name it wait until it is.');
    } else if (browse === null) {
      hint = trans.__('This server has it at %1, outside the file browser: open a terminal or read it from code.', path);
    }
    return {
      name: d.name,
      description: d.description || '',
      access: d.readOnly ? trans.__('read-only') : trans.__('read and write'),
      state: d.state,
      stateText: datasetState(d.state, trans),
      path,
      browse,
      hint
    };
  });
}

/** The datasets a job may name: every dataset of my teams (one not ready makes the job wait for it). */
export function datasetChoices(s: ISnapshot | null): { name: string; label: string }[] {
  return (s?.datasets ?? []).map(d => ({
    name: d.name,
    label: d.state === 'Bound' ? d.name : `${d.name} (${datasetState(d.state)})`
  }));
}
