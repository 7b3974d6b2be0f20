/**
 * What this extension provides to others: the team's quota, as the one model every view of
 * ours renders. Another extension asks for it by the token:
 *
 *     requires: [ITenancyQuota],
 *     activate: (app, quota: ITenancyQuota) => quota.changed.connect((_, s) => ...)
 */

import { Token } from '@lumino/coreutils';
import { ISignal } from '@lumino/signaling';

import { IQuotaNode, IServerEnd, ISnapshot, ITenant } from './types';

export interface ITenancyQuota {
  /** The latest snapshot from this server's event stream (null until the first). */
  readonly snapshot: ISnapshot | null;
  /** Emitted with each new snapshot: a state event, a workload's change, or the service down. */
  readonly changed: ISignal<ITenancyQuota, ISnapshot | null>;
  /** The team this server runs for (null outside a team, or before the first snapshot). */
  readonly tenant: ITenant | null;
  /** The team's quota from its leaf to the root, each node with its resources' bars. */
  readonly path: IQuotaNode[];
  /** This server's end once its eviction's countdown is over: stopping, then stopped (else null). */
  readonly end: IServerEnd | null;
  /** Tell the model this server stopped answering (JupyterLab's connection-lost hook does). */
  lost(): void;
}

export const ITenancyQuota = new Token<ITenancyQuota>(
  'jupyterhub-tenancy:ITenancyQuota',
  "The team's quota (its leaf to the root, with usage, guarantee, ceiling and borrowing) and my workloads, live."
);
