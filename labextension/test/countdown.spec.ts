import { saveDue, saveMargin, warningText } from '../src/countdown';

describe('the automatic save before a preemption', () => {
  it('saves a quarter of the warning before the end, between 3 and 15 seconds', () => {
    expect(saveMargin(60)).toBe(15);
    expect(saveMargin(20)).toBe(5);
    expect(saveMargin(4)).toBe(3);
    expect(saveMargin(600)).toBe(15);
  });

  it('is due once, late in the warning, and at once when the warning came late', () => {
    expect(saveDue(30, 60, false)).toBe(false);
    expect(saveDue(15, 60, false)).toBe(true);
    expect(saveDue(15, 60, true)).toBe(false);
    expect(saveDue(2, 20, false)).toBe(true);
  });

  it('says when, and that documents are saved on this server only', () => {
    expect(warningText('This server', 44.2, 'Reclaimed by team-c/x.', true)).toBe(
      'This server will be stopped in 45 s to make room for other work. Open documents are saved for you before then. Reclaimed by team-c/x.'
    );
    expect(warningText('This server', 65, '', false)).toBe('This server will be stopped in 1 min 5 s to make room for other work.');
    expect(warningText('Your server "gpu"', 0, '', false)).toBe('Your server "gpu" will be stopped now to make room for other work.');
  });
});
