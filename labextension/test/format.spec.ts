import { elapsed, evictions, noticeText, plainReason, positionText, statusLine } from '../src/format';
import { IResourceBar, ISnapshot, IWorkload } from '../src/types';

const bar = (over: Partial<IResourceBar> = {}): IResourceBar => ({
  resource: 'cpu', used: 12, min: 10, max: 20, borrowed: 2, usedText: '12', minText: '10', maxText: '20',
  atMax: false, ...over
});

const wl = (over: Partial<IWorkload> = {}): IWorkload => ({
  id: 'a1', kind: 'training', name: 'train-a1', user: 'alice', namespace: 'team-a', state: 'Running',
  created: 1000, pods: [{ name: 'train-a1-0', phase: 'Running', startedAt: 1010 }], ...over
});

const snap = (over: Partial<ISnapshot> = {}): ISnapshot => ({
  available: true, ok: true, message: null, user: 'alice',
  server: { name: '', workloadId: 'nb1' },
  tenant: { group: 'team-a', namespace: 'team-a', quotaLeaf: 'root.a.1', priorityClasses: [] },
  path: [{ name: 'root.a.1', resources: [bar(), bar({ resource: 'memory', used: 0, min: 10 * 2 ** 30, max: 20 * 2 ** 30, borrowed: 0 })] }],
  workloads: [wl(), wl({ id: 'b2', state: 'Pending', position: 3, leafPosition: 1, pods: [] })],
  notices: [], ...over
});

describe('the status bar line', () => {
  it('says the team, usage against guarantee, borrowed, ceiling and queued, as the issue shows', () => {
    const line = statusLine(snap(), 2000);
    expect(line.text).toBe('team-a  CPU 12/10 (+2 borrowed) of 20 · 1 queued');
    expect(line.level).toBe('borrowing');
  });

  it('is red at the ceiling', () => {
    const s = snap({ path: [{ name: 'root.a.1', resources: [bar({ used: 20, borrowed: 10, atMax: true })] }] });
    expect(statusLine(s, 2000).level).toBe('full');
  });

  it('is plain within the guarantee, with nothing queued', () => {
    const s = snap({ path: [{ name: 'root.a.1', resources: [bar({ used: 5, borrowed: 0 })] }], workloads: [] });
    expect(statusLine(s, 2000)).toMatchObject({ text: 'team-a  CPU 5/10 of 20', level: 'ok' });
  });

  it('counts down while my server is being evicted', () => {
    const s = snap({ workloads: [wl({ id: 'nb1', kind: 'notebook', evictionDeadline: 2065, evictionMessage: 'Reclaimed by x' })] });
    expect(statusLine(s, 2000)).toMatchObject({ text: 'Server stops in 1:05', level: 'evicting' });
  });

  it('says in words when the scheduler is down', () => {
    const line = statusLine(snap({ ok: false, message: 'The tenancy scheduler cannot be reached right now.' }), 0);
    expect(line).toMatchObject({ text: 'Team quota unavailable', level: 'down' });
    expect(line.title).toMatch(/cannot be reached/);
  });
});

describe('the lines put together from the vocabulary', () => {
  it('shows memory in GiB in the status bar', () => {
    const s = snap({ path: [{ name: 'root.a.1', resources: [bar({ used: 10, borrowed: 0 }), bar({ resource: 'memory', used: 8 * 2 ** 30, min: 10 * 2 ** 30, max: 20 * 2 ** 30, borrowed: 0 })] }], workloads: [] });
    expect(statusLine(s, 2000).text).toBe('team-a  CPU 10/10 of 20  memory 8 GiB/10 GiB of 20 GiB');
  });

  it('says how long a job has run or waited', () => {
    expect(elapsed(wl(), 1130)).toBe('running 2 min');
    expect(elapsed(wl(), 1135)).toBe('running 2 min 5 s');
    expect(elapsed(wl({ state: 'Succeeded', finished: 1055 }), 5000)).toBe('ran 45 s');
    expect(elapsed(wl({ state: 'Pending', pods: [] }), 1030)).toBe('waiting 30 s');
  });

  it('puts the scheduler reason in plain words', () => {
    const w = wl({
      state: 'Pending', reason: 'quota-max', message: 'quota root.a.1 is at its max for cpu: needs 5, uses 20 of 20',
      details: { node: 'root.a.1', resource: 'cpu', need: '5', used: '20', limit: '20' }
    });
    expect(plainReason(w)).toBe('Waiting for room in quota root.a.1: it is full for CPU (20 of 20 in use; this needs 5).');
    expect(plainReason(wl({ state: 'Pending', reason: 'waiting-for-eviction', details: { victims: ['a/b'] } })))
      .toBe('Starting soon: room is being made for it (1 pod(s) are stopping).');
    expect(plainReason(wl({ reason: 'failed', message: 'train-0 exited with status 2' }))).toBe('Train-0 exited with status 2.');
    expect(positionText(wl({ state: 'Pending', position: 2, leafPosition: 1 }))).toBe('position 2 in the queue, 1 in your team');
  });

  it('lists evictions soonest first and forgets finished ones', () => {
    const s = snap({
      workloads: [
        wl({ id: 'x', kind: 'notebook', evictionDeadline: 2050 }),
        wl({ id: 'y', kind: 'notebook', evictionDeadline: 2010 }),
        wl({ id: 'z', kind: 'notebook', evictionDeadline: 2010, state: 'Preempted' })
      ]
    });
    expect(evictions(s, 2000).map(e => [e.workload.id, e.remaining])).toEqual([['y', 10], ['x', 50]]);
  });

  it('says which server was stopped, when and by whom', () => {
    const text = noticeText({ workload: 'w', name: 'nb-alice', serverName: 'gpu', time: 0, preemptor: 'team-c/job-0', message: 'Reclaimed by team-c/job-0: its quota borrowed.' });
    expect(text).toMatch(/^Your server "gpu" was stopped at \d\d:\d\d:\d\d by team-c\/job-0\. Reclaimed by/);
  });
});
