// Only the pure logic (the vocabulary, the model's reducers, the countdown's plan) is tested
// here: it needs no browser. The views are exercised in headless Chromium by tests/hub.
// Times are read in UTC, as tests/vocabulary.json states them.
process.env.TZ = 'UTC';

module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  transform: { '^.+\\.tsx?$': ['ts-jest', { tsconfig: 'tsconfig.test.json' }] }
};
