import {
  elapsed,
  evictions,
  glanceText,
  logStatus,
  noticeText,
  plainError,
  plainMessage,
  plainReason,
  positionText,
  statusLine,
  workTitle
} from '../src/format';
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
  it('says the team, used of the guarantee, then borrowed, and queued', () => {
    const line = statusLine(snap(), 2000);
    expect(line.text).toBe('team-a  CPU 10 of 10 + 2 borrowed · 1 queued');
    expect(line.level).toBe('borrowing');
    expect(line.title).toMatch(/^CPU: 10 in use of a guarantee of 10, 2 borrowed, at most 20\.\n/);
  });

  it.each([
    ['at the guarantee, borrowing as much again (issue 22: not "CPU 20/10 (+10 borrowed) of 20")', 20, 10, 'CPU 10 of 10 + 10 borrowed'],
    ['within the guarantee', 4, 10, 'CPU 4 of 10'],
    ['with no guarantee, all borrowed', 3, 0, 'CPU 3 borrowed'],
    ['with no guarantee, nothing used', 0, 0, 'CPU none guaranteed']
  ])('reads a bar at a glance: %s', (_, used, min, text) => {
    expect(glanceText(bar({ used, min, borrowed: Math.max(0, used - min) }))).toBe(text);
  });

  it("does not count a queued job's booked room as used (issue 22)", () => {
    // The scheduler books the room of a job waiting for its victims to go: it is queued, not used.
    const waiting = wl({
      id: 'q', state: 'Pending', reason: 'waiting-for-eviction', pods: [{ name: 'q-0', phase: 'Pending' }],
      resources: { requests: { cpu: '10' } }
    });
    const s = snap({
      path: [{ name: 'root.a.1', resources: [bar({ used: 20, borrowed: 10 })] }],
      workloads: [wl({ resources: { requests: { cpu: '10' } } }), waiting]
    });
    expect(statusLine(s, 2000)).toMatchObject({ text: 'team-a  CPU 10 of 10 · 1 queued', level: 'ok' });
  });

  it('does not count a notebook being stopped as queued, even after its countdown (issue 22: no phantom "1 queued")', () => {
    const leaving = wl({ id: 'nb2', kind: 'notebook', state: 'Pending', pods: [{ name: 'nb-alice-gpu-0', phase: 'Terminating' }] });
    const warned = wl({ id: 'nb3', kind: 'notebook', state: 'Pending', evictionDeadline: 1900, pods: [] });
    const s = snap({ path: [{ name: 'root.a.1', resources: [bar({ used: 5, borrowed: 0 })] }], workloads: [leaving, warned] });
    expect(statusLine(s, 2000).text).toBe('team-a  CPU 5 of 10');
  });

  it('is red at the ceiling', () => {
    const s = snap({ path: [{ name: 'root.a.1', resources: [bar({ used: 20, borrowed: 10, atMax: true })] }] });
    expect(statusLine(s, 2000).level).toBe('full');
  });

  it('is plain within the guarantee, with nothing queued', () => {
    const s = snap({ path: [{ name: 'root.a.1', resources: [bar({ used: 5, borrowed: 0 })] }], workloads: [] });
    expect(statusLine(s, 2000)).toMatchObject({ text: 'team-a  CPU 5 of 10', level: 'ok' });
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
    expect(statusLine(s, 2000).text).toBe('team-a  CPU 10 of 10  memory 8 GiB of 10 GiB');
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

  it('says which server was stopped, when it stopped and for whom, in people\'s words (issue 22)', () => {
    const n = { workload: 'w', name: 'nb-alice-gpu', serverName: 'gpu', time: 60, preemptor: 'team-c/nb-carol-0',
      message: 'Reclaimed by team-c/nb-carol-0: its quota root.a.1 was borrowing and root.b.1 reclaimed its guarantee' };
    // the decision was at 00:01:00; the server stopped at 00:01:47 (the notebook's end, in the snapshot)
    const s = snap({ workloads: [wl({ id: 'w', kind: 'notebook', state: 'Preempted', finished: 107 })] });
    expect(noticeText(n, undefined, s)).toBe(
      'Your server "gpu" was stopped at 00:01:47 to make room for carol\'s notebook. ' +
        'Its quota root.a.1 was borrowing and root.b.1 reclaimed its guarantee.'
    );
    expect(noticeText({ ...n, preemptor: 'team-c/carol-job-0' })).toMatch(
      /^Your server "gpu" was stopped at 00:01:00 to make room for the job "carol-job" of team-c\. Its quota/
    );
  });
});

describe("people's words (issue 22)", () => {
  it('names pod references as people do', () => {
    const s = snap({ workloads: [wl({ name: 'panel-job', namespace: 'team-a' })] });
    expect(plainMessage('Reclaimed by team-c/nb-carol-0: x', s)).toBe("Reclaimed by carol's notebook: x");
    expect(plainMessage('Preempted by team-a/panel-job-0', s)).toBe('Preempted by your job "panel-job"');
    expect(plainMessage('waiting for 1 evicted pod(s) to terminate: team-a/nb-alice-0', s))
      .toBe('waiting for 1 evicted pod(s) to terminate: your notebook');
    expect(plainMessage('uses 20/10 of quota root.a.1', s)).toBe('uses 20/10 of quota root.a.1');
  });

  it('titles my notebooks by what they are to me', () => {
    const nb = wl({ id: 'n', kind: 'notebook', name: 'nb-alice-gpu', serverName: 'gpu', profile: 'large' });
    expect(workTitle(nb, null)).toBe('Your notebook "gpu" (Large)');
    expect(workTitle({ ...nb, serverName: '', profile: null }, 'n')).toBe('This notebook');
    expect(workTitle(wl(), null)).toBe('train-a1');
  });

  it('never shows an exception\'s repr', () => {
    expect(plainError('403 SpawnException(reason=resource-quota)', 403))
      .toBe('The request was refused (HTTP 403). Try again in a moment; if it keeps failing, ask an admin.');
    expect(plainError('HTTPError(500, "boom")', 500)).toMatch(/^The request was refused \(HTTP 500\)/);
    expect(plainError('You may cancel only your own jobs.', 403)).toBe('You may cancel only your own jobs.');
  });

  it('says plainly that a finished job wrote nothing (not "its output is complete. (no output yet)")', () => {
    expect(logStatus('quiet', 'Succeeded', 'done', false)).toBe('quiet is done. The job ended without writing any output.');
    expect(logStatus('loud', 'Cancelled', 'cancelled', true)).toBe('loud is cancelled. This is the end of its output.');
    expect(logStatus('slow', 'Running', 'running', false)).toBe('slow is running; it has not written any output yet.');
  });
});
