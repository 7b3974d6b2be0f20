/** The submit form's pure parts: the body it sends, and the sentence about my own servers a job would stop. */

import { IDryRun } from './types';
import { english, ITrans } from './vocabulary';

/** The body the service takes (see hub_ext/service/workloads.py), from the form's values. */
export function submission(values: {
  mode: 'command' | 'script';
  text: string;
  cpu: string;
  memory: string;
  gpu: string;
  replicas: string;
  priorityClass: string;
  name: string;
  tenant: string;
  /** The datasets chosen; none: the service mounts every ready dataset of the team. */
  datasets?: string[];
}): Record<string, unknown> {
  const requests: Record<string, string> = {};
  if (values.cpu.trim()) {
    requests.cpu = values.cpu.trim();
  }
  if (values.memory.trim()) {
    requests.memory = values.memory.trim();
  }
  if (values.gpu.trim() && values.gpu.trim() !== '0') {
    requests['nvidia.com/gpu'] = values.gpu.trim();
  }
  const body: Record<string, unknown> = {
    kind: 'training',
    resources: { requests, limits: {} },
    replicas: Number(values.replicas || '1'),
    priorityClassName: values.priorityClass || undefined,
    tenant: values.tenant || undefined,
    name: values.name.trim() || undefined
  };
  if (values.datasets && values.datasets.length) {
    body.datasets = values.datasets;
  }
  if (values.mode === 'script') {
    body.script = values.text;
  } else {
    body.command = ['/bin/sh', '-c', values.text];
  }
  return body;
}

/** My own workloads a dry run would evict, as a sentence (empty when none). */
export function ownVictims(dry: IDryRun, user: string | undefined, trans: ITrans = english): string {
  const mine = dry.evictions.filter(e => e.user === user);
  if (!mine.length) {
    return '';
  }
  const names = mine.map(e =>
    e.kind !== 'notebook'
      ? trans.__('your job %1', e.name)
      : e.serverName
        ? trans.__('your server "%1"', e.serverName)
        : trans.__('your default server')
  );
  return trans.__(
    'This job would stop %1 to make room (unsaved work there would be lost).',
    names.join(` ${trans.__('and')} `)
  );
}
