// Only the pure logic (formatting, the model's reducers, the countdown's plan) is tested
// here: it needs no browser. The views are exercised in headless Chromium by tests/hub.
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  transform: { '^.+\\.tsx?$': ['ts-jest', { tsconfig: 'tsconfig.test.json' }] }
};
