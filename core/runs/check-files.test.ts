import { describe, expect, it } from 'vitest';
import { checkTouchedFiles } from './check-files';

const files = (...paths: string[]) => paths.map((path) => ({ path }));

describe('checkTouchedFiles', () => {
  it('flags the script the check command names, relative or under the workspace', () => {
    expect(checkTouchedFiles('bash check.sh', files('check.sh', 'answer.txt'))).toEqual([{ path: 'check.sh', reason: 'named in the check command' }]);
    expect(checkTouchedFiles('/workspace/scripts/ci.sh --fast', files('scripts/ci.sh'))).toEqual([{ path: 'scripts/ci.sh', reason: 'named in the check command' }]);
    expect(checkTouchedFiles('pytest checks/ -q', files('checks/conftest_helpers.py'))).toEqual([{ path: 'checks/conftest_helpers.py', reason: 'named in the check command' }]);
  });

  it('flags test files and runner configuration, not the code under test', () => {
    const out = checkTouchedFiles('npm test', files('src/sum.ts', 'src/sum.test.ts', 'test/helpers.js', 'package.json', 'vitest.config.mts', 'tests/test_api.py', 'pkg/sum_test.go', 'README.md'));
    expect(out).toEqual([
      { path: 'src/sum.test.ts', reason: 'a test file' },
      { path: 'test/helpers.js', reason: 'a test file' },
      { path: 'package.json', reason: 'test or build configuration' },
      { path: 'vitest.config.mts', reason: 'test or build configuration' },
      { path: 'tests/test_api.py', reason: 'a test file' },
      { path: 'pkg/sum_test.go', reason: 'a test file' },
    ]);
  });

  it('flags a rename away from a test file by its old path', () => {
    expect(checkTouchedFiles('make check', [{ path: 'src/old.ts', oldPath: 'src/old.test.ts' }])).toEqual([{ path: 'src/old.ts', reason: 'a test file' }]);
  });

  it('leaves an attempt that changed only the code alone', () => {
    expect(checkTouchedFiles('bash check.sh', files('answer.txt', 'src/contest.ts', 'latest.md'))).toEqual([]);
  });
});
