import { applyWorkload, mergeWorkload, TenancyModel } from '../src/model';
import { statusLine } from '../src/format';
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

describe("this server's end (issue 22: the countdown ends in words, not at 0:00)", () => {
  const here = (over: Partial<IWorkload> = {}): IWorkload => ({
    ...w('nb1', 'Pending'), kind: 'notebook', name: 'nb-alice', evictionDeadline: 100,
    evictionMessage: 'Reclaimed by team-c/carol-job-0: its quota root.a.1 was borrowing', ...over
  });
  const state = (nb: IWorkload): ISnapshot => ({ ...snapshot, server: { name: '', workloadId: 'nb1' }, workloads: [nb] });

  it('counts down, is stopping at the deadline, and stopped once the server no longer answers', () => {
    let now = 90;
    const model = new TenancyModel(undefined, () => now);
    const source = new FakeSource();
    model.connect(source);
    source.send('state', state(here()));
    expect(model.end).toBeNull();
    expect(statusLine(model.snapshot, now, undefined, model.end).text).toBe('Server stops in 0:10');
    now = 101;
    expect(model.tick()).toBe(true);
    expect(model.end).toMatchObject({ phase: 'stopping' });
    expect(statusLine(model.snapshot, now, undefined, model.end).text).toBe('Server stopping…');
    now = 140; // long after the deadline: still stopping, never "1 queued" nor "0:00"
    model.tick();
    expect(statusLine(model.snapshot, now, undefined, model.end).text).toBe('Server stopping…');
    source.onerror?.({} as Event); // the server is gone
    expect(model.end).toEqual({ phase: 'stopped', at: 140, why: here().evictionMessage });
    const line = statusLine(model.snapshot, now, undefined, model.end);
    expect(line).toMatchObject({ text: 'Server stopped', level: 'stopped' });
    expect(line.title).toBe(
      'This server was stopped at 00:02:20 to make room for the job "carol-job" of team-c. ' +
        'Its quota root.a.1 was borrowing. Your files are kept: start a server again from the hub home when you need one.'
    );
  });

  it('is stopped when JupyterLab itself lost the server after the deadline', () => {
    let now = 101;
    const model = new TenancyModel(undefined, () => now);
    model.set(state(here()));
    expect(model.end?.phase).toBe('stopping');
    model.lost();
    expect(model.end?.phase).toBe('stopped');
  });

  it('is not ending when the server is lost before its deadline, nor once the eviction is withdrawn', () => {
    let now = 50;
    const model = new TenancyModel(undefined, () => now);
    model.set(state(here()));
    model.lost();
    expect(model.end).toBeNull();
    now = 101;
    model.set(state(here()));
    expect(model.end?.phase).toBe('stopping');
    model.set(state(here({ state: 'Running', evictionDeadline: undefined })));
    expect(model.end).toBeNull();
  });

  it('says the server is not running when JupyterLab lost it and no eviction ended it (issue 22)', () => {
    const now = 50;
    const model = new TenancyModel(undefined, () => now);
    const source = new FakeSource();
    model.connect(source);
    source.send('state', { ...snapshot, server: { name: '', workloadId: 'nb1' }, workloads: [here({ state: 'Running', evictionDeadline: undefined })] });
    source.onerror?.({} as Event); // its stream dropped: maybe a blip
    expect(model.gone).toBe(false);
    expect(statusLine(model.snapshot, now, undefined, model.end, model.gone).text).toBe('Team quota unavailable');
    model.lost(); // JupyterLab: the server is not running (stopped from the hub home, culled...)
    expect(model.gone).toBe(true);
    const line = statusLine(model.snapshot, now, undefined, model.end, model.gone);
    expect(line).toMatchObject({ text: 'Server not running', level: 'stopped' });
    expect(line.title).toMatch(/^This server does not answer: it was stopped .* start it again from the hub home\.$/);
    source.send('state', snapshot); // it answers again
    expect(model.gone).toBe(false);
  });
});
