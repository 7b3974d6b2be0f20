import { applyWorkload, mergeWorkload, TenancyModel } from '../src/model';
import { ISnapshot, IWorkload } from '../src/types';

const w = (id: string, state = 'Pending', user = 'alice'): IWorkload => ({
  id, kind: 'training', name: id, user, namespace: 'team-a', state, created: 0
});

const snapshot: ISnapshot = { available: true, ok: true, message: null, user: 'alice', workloads: [w('a'), w('b')] };

class FakeSource {
  listeners: Record<string, (ev: MessageEvent) => void> = {};
  onerror: ((ev: Event) => any) | null = null;
  closed = false;
  addEventListener(type: string, l: (ev: MessageEvent) => void) {
    this.listeners[type] = l;
  }
  close() {
    this.closed = true;
  }
  send(type: string, data: unknown) {
    this.listeners[type]({ data: JSON.stringify(data) } as MessageEvent);
  }
}

describe('the model', () => {
  it('replaces a workload in place and adds a new one first', () => {
    expect(mergeWorkload([w('a'), w('b')], w('b', 'Running')).map(x => [x.id, x.state])).toEqual([['a', 'Pending'], ['b', 'Running']]);
    expect(mergeWorkload([w('a')], w('c')).map(x => x.id)).toEqual(['c', 'a']);
  });

  it('ignores teammates\' workloads (the panel lists mine)', () => {
    expect(applyWorkload(snapshot, w('t', 'Running', 'erin')).workloads).toHaveLength(2);
  });

  it('is fed by the stream: snapshots, single workloads, and the service going down', () => {
    const model = new TenancyModel();
    const seen: (ISnapshot | null)[] = [];
    model.changed.connect((_, s) => seen.push(s));
    const source = new FakeSource();
    model.connect(source);
    source.send('state', snapshot);
    source.send('workload', { ...w('a', 'Running'), evictionDeadline: 99 });
    expect(model.snapshot?.workloads?.[0]).toMatchObject({ id: 'a', state: 'Running', evictionDeadline: 99 });
    source.send('status', { ok: false, message: 'The tenancy scheduler cannot be reached right now.' });
    expect(model.snapshot).toMatchObject({ ok: false, message: 'The tenancy scheduler cannot be reached right now.' });
    expect(model.snapshot?.workloads).toHaveLength(2);
    source.onerror?.({} as Event);
    expect(model.snapshot?.message).toMatch(/does not answer/);
    expect(seen).toHaveLength(4);
    model.disconnect();
    expect(source.closed).toBe(true);
  });
});
