/** What the server extension (hub_ext/labserver) sends; see its handlers.py. */

export interface IResourceBar {
  resource: string;
  used: number;
  min: number;
  max: number | null;
  borrowed: number;
  usedText: string;
  minText: string;
  maxText: string | null;
  atMax: boolean;
}

export interface IQuotaNode {
  name: string;
  resources: IResourceBar[];
}

export interface ITenant {
  group: string;
  namespace: string;
  quotaLeaf: string | null;
  priorityClasses: string[];
  errors?: string[];
}

export interface IPod {
  name: string;
  phase: string;
  startedAt?: number | null;
  finishedAt?: number | null;
}

export interface IWorkload {
  id: string;
  kind: 'notebook' | 'training' | string;
  name: string;
  user: string;
  namespace: string;
  tenant?: string | null;
  priorityClassName?: string | null;
  state: string;
  created: number;
  finished?: number | null;
  replicas?: number;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  serverName?: string | null;
  /** The spawn profile a notebook was started with (`large`), when the service says. */
  profile?: string | null;
  reason?: string | null;
  message?: string | null;
  details?: Record<string, any> | null;
  position?: number | null;
  leafPosition?: number | null;
  pods?: (IPod & { reason?: string | null })[];
  events?: { time: number; type: string; message: string }[];
  evictionDeadline?: number;
  evictionMessage?: string;
  /** Its eviction was withdrawn (the reason went away): when and why; it runs on. */
  evictionWithdrawn?: { time?: number; message?: string };
}

export interface INotice {
  workload: string;
  name: string;
  serverName: string;
  time: number;
  message: string;
  preemptor?: string;
}

/** A dataset of my teams (the service's `/me` `datasets`), with where it is in this server. */
export interface IDataset {
  name: string;
  description: string;
  mountPath: string;
  readOnly: boolean;
  /** In my namespace: Bound, Pending or Refused. */
  state: string;
  /** Why it is not ready (the binder's or the quota's words). */
  message?: string | null;
  namespace?: string;
  /** Where this server has it (its own mount, else the dataset's mount path). */
  path?: string | null;
  /** That folder relative to the server's root, for the file browser; null when it cannot reach it. */
  browse?: string | null;
}

export interface ISnapshot {
  available: boolean;
  ok: boolean;
  message: string | null;
  time?: number;
  user?: string;
  server?: { name: string; workloadId: string | null };
  tenant?: ITenant | null;
  tenants?: ITenant[];
  path?: IQuotaNode[];
  workloads?: IWorkload[];
  notices?: INotice[];
  datasets?: IDataset[];
}

export interface IDryRun {
  state: string;
  startsAfterEvictions: boolean;
  message: string | null;
  position: number | null;
  evictions: {
    workload: string | null;
    kind: string | null;
    name: string;
    user: string | null;
    serverName: string | null;
    namespace: string;
    message: string;
  }[];
}

export const FINAL = ['Succeeded', 'Failed', 'Cancelled', 'Stopped', 'Preempted', 'Rejected', 'Quarantined'];

/**
 * This server's end, as the page saw it: `stopping` once its eviction's deadline passed
 * while it still answered, `stopped` once it no longer answers (or the service says it ended).
 */
export interface IServerEnd {
  phase: 'stopping' | 'stopped';
  /** When it stopped (epoch seconds): the service's end of the notebook, else when the page lost it. */
  at: number;
  /** Why, as the service said (its eviction message). */
  why: string;
}
