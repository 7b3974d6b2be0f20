import { ownVictims, submission } from '../src/submission';

const values = {
  mode: 'command' as const, text: 'python train.py', cpu: '2', memory: '', gpu: '0', replicas: '1',
  priorityClass: 'high-priority-research', name: '', tenant: ''
};

describe('the submit form', () => {
  it('sends a command through the shell, with only the resources given', () => {
    expect(submission(values)).toEqual({
      kind: 'training', command: ['/bin/sh', '-c', 'python train.py'], replicas: 1,
      resources: { requests: { cpu: '2' }, limits: {} }, priorityClassName: 'high-priority-research',
      tenant: undefined, name: undefined
    });
  });

  it('sends a script as a script, with GPUs and memory', () => {
    const body = submission({ ...values, mode: 'script', text: 'print(1)', gpu: '1', memory: '4Gi', name: 'x' });
    expect(body).toMatchObject({ script: 'print(1)', name: 'x', resources: { requests: { cpu: '2', memory: '4Gi', 'nvidia.com/gpu': '1' } } });
    expect(body.command).toBeUndefined();
  });

  it('names the datasets chosen, and none when none is (the service mounts every ready one)', () => {
    expect(submission({ ...values, datasets: ['fashion-mnist', 'imagenet'] }).datasets).toEqual(['fashion-mnist', 'imagenet']);
    expect('datasets' in submission({ ...values, datasets: [] })).toBe(false);
    expect('datasets' in submission(values)).toBe(false);
  });

  it('names my own servers a job would stop, and nobody else\'s', () => {
    const dry = {
      state: 'Pending', startsAfterEvictions: true, message: null, position: null,
      evictions: [
        { workload: 'n1', kind: 'notebook', name: 'nb-alice', user: 'alice', serverName: '', namespace: 'team-a', message: '' },
        { workload: 'n2', kind: 'notebook', name: 'nb-alice-gpu', user: 'alice', serverName: 'gpu', namespace: 'team-a', message: '' },
        { workload: 'n3', kind: 'notebook', name: 'nb-bob', user: 'bob', serverName: '', namespace: 'team-b', message: '' }
      ]
    };
    expect(ownVictims(dry, 'alice')).toBe(
      'This job would stop your default server and your server "gpu" to make room (unsaved work there would be lost).'
    );
    expect(ownVictims(dry, 'carol')).toBe('');
  });
});
