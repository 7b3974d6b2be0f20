import { datasetChoices, datasetRows } from '../src/datasets';
import { ISnapshot } from '../src/types';

const snapshot: ISnapshot = {
  available: true, ok: true, message: null, user: 'alice',
  datasets: [
    { name: 'fashion-mnist', description: 'Fashion-MNIST', mountPath: '/datasets/fashion-mnist', readOnly: true,
      state: 'Bound', path: '/home/alice/datasets/fashion-mnist', browse: 'datasets/fashion-mnist' },
    { name: 'scratch', description: '', mountPath: '/datasets/scratch', readOnly: false, state: 'Bound',
      path: '/datasets/scratch', browse: null },
    { name: 'imagenet', description: 'ImageNet', mountPath: '/datasets/imagenet', readOnly: true, state: 'Refused',
      message: 'exceeded quota: dev-quota' },
    { name: 'coco', description: '', mountPath: '/datasets/coco', readOnly: true, state: 'Pending' }
  ]
};

describe('the Datasets section', () => {
  it('says each dataset\'s access, state and where it is, and whether the file browser can open it', () => {
    const rows = datasetRows(snapshot);
    expect(rows.map(r => [r.name, r.access, r.stateText, r.path, r.browse])).toEqual([
      ['fashion-mnist', 'read-only', 'ready', '/home/alice/datasets/fashion-mnist', 'datasets/fashion-mnist'],
      ['scratch', 'read and write', 'ready', '/datasets/scratch', null],
      ['imagenet', 'read-only', 'refused', '/datasets/imagenet', null],
      ['coco', 'read-only', 'not ready yet', '/datasets/coco', null]
    ]);
    expect(rows.map(r => r.hint)).toEqual([
      '',
      'This server has it at /datasets/scratch, outside the file browser: open a terminal or read it from code.',
      'Not ready in your namespace: exceeded quota: dev-quota. Jobs that name it wait until it is.',
      'Not ready in your namespace yet: jobs that name it wait until it is.'
    ]);
    expect(datasetRows({ available: true, ok: true, message: null })).toEqual([]);
  });

  it('offers every dataset of my teams to a job, saying which are not ready', () => {
    expect(datasetChoices(snapshot)).toEqual([
      { name: 'fashion-mnist', label: 'fashion-mnist' }, { name: 'scratch', label: 'scratch' },
      { name: 'imagenet', label: 'imagenet (refused)' }, { name: 'coco', label: 'coco (not ready yet)' }
    ]);
    expect(datasetChoices(null)).toEqual([]);
  });
});
