import { describe, expect, it } from 'vitest';
import { gitControlFileAlias, isNtfsDot, windowsNameReason } from './git-path-aliases';
import { unsafePathReason, unsafeSymlinkReason } from './result-paths';

// Issue 22, item 2: the name lists of git's own test suite, checked against Airlock's path rule on
// every OS (git refuses these only where core.protectNTFS / core.protectHFS apply; a result may be
// applied on any OS). Lists from git's t/t0060-path-utils.sh and t/t1014-read-tree-confusing.sh.

const u200c = '\u200c';

describe('aliases of .git (t1014-read-tree-confusing, t0060)', () => {
  // t1014: every one is refused at the end of a path and as a folder.
  const t1014 = ['.', '..', '.git', '.GIT', `${u200c}.Git`, `.gI${u200c}T`, `.GiT${u200c}`, 'git~1', '.git. ', '.git...:alternate-stream'];
  it.each(t1014)('refuses %j as a name and as a folder', (name) => {
    expect(unsafePathReason(name)).toBeDefined();
    expect(unsafePathReason(`a/${name}`)).toBeDefined();
    expect(unsafePathReason(`${name}/x`)).toBeDefined();
  });

  it('refuses backslash forms (t1014 "backslashes")', () => {
    expect(unsafePathReason('.\\\\.GIT\\\\foobar')).toBeDefined();
    expect(unsafePathReason('.git\\\\foobar')).toBeDefined();
  });

  const more = [
    '.git::$INDEX_ALLOCATION', '.git:x', 'git~1:y', '.git.', '.git ', '.git. . ', 'GIT~1', 'Git~1.', 'git~1 ',
    // HFS+ ignorable code points anywhere in the name (git's next_hfs_char list).
    ...[0x200c, 0x200d, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x206a, 0x206b, 0x206c, 0x206d, 0x206e, 0x206f, 0xfeff].map((cp) => `.g${String.fromCodePoint(cp)}it`),
    `\ufeff.git`, `.GI\u206fT`, `.git\u200d`,
  ];
  it.each(more)('refuses %j', (name) => {
    expect(unsafePathReason(`src/${name}/config`)).toBeDefined();
  });

  it('keeps names git allows', () => {
    for (const name of ['.gitx', '.git.x', 'gi~1', '.g\u00adit', 'git', 'x.git', '.gitignore', '.gitmodules', '.gitattributes', '.mailmap', 'README.md', 'src/index.ts', 'win32 x', 'comm', 'conout.c', 'com0.c', 'lptN', '...a', 'a..b']) {
      expect(unsafePathReason(name), name).toBeUndefined();
    }
  });
});

describe('aliases of .gitmodules and the other control files (t0060 is_dotgitmodules …)', () => {
  const gitmodules = [
    '.gitmodules', `.git${u200c}modules`, '.Gitmodules', '.gitmoduleS',
    '.gitmodules ', '.gitmodules.', '.gitmodules  ', '.gitmodules. ', '.gitmodules .', '.gitmodules..', '.gitmodules   ', '.gitmodules.  ', '.gitmodules . ', '.gitmodules  .',
    '.Gitmodules ', '.Gitmodules.', '.Gitmodules  ', '.Gitmodules. ', '.Gitmodules .', '.Gitmodules..', '.Gitmodules   ', '.Gitmodules.  ', '.Gitmodules . ', '.Gitmodules  .',
    'GITMOD~1', 'gitmod~1', 'GITMOD~2', 'gitmod~3', 'GITMOD~4',
    'GITMOD~1 ', 'gitmod~2.', 'GITMOD~3  ', 'gitmod~4. ', 'GITMOD~1 .', 'gitmod~2   ', 'GITMOD~3.  ', 'gitmod~4 . ',
    'GI7EBA~1', 'gi7eba~9',
    'GI7EB~10', 'GI7EB~11', 'GI7EB~99', 'GI7EB~10', 'GI7E~100', 'GI7E~101', 'GI7E~999', '~1000000', '~9999999',
    '.gitmodules:$DATA', 'gitmod~4 . :$DATA',
  ];
  const notGitmodules = [
    '.gitmodules x', '.gitmodules .x', ' .gitmodules', '..gitmodules', 'gitmodules', '.gitmodule', '.gitmodules x ',
    'GI7EBA~', 'GI7EBA~0', 'GI7EBA~~1', 'GI7EBA~X', 'Gx7EBA~1', 'GI7EBX~1', 'GI7EB~1', 'GI7EB~01', 'GI7EB~1X', '.gitmodules,:$DATA',
  ];
  it.each(gitmodules)('%j is .gitmodules', (name) => {
    expect(gitControlFileAlias(name)).toBe('.gitmodules');
    // Only the literal name may be part of a result (a file, flagged); every alias is refused, and a symlink of any.
    if (name === '.gitmodules') expect(unsafePathReason(name)).toBeUndefined();
    else expect(unsafePathReason(`sub/${name}`)).toBeDefined();
    expect(unsafeSymlinkReason(`sub/${name}`)).toBeDefined();
  });
  it.each(notGitmodules)('%j is not .gitmodules', (name) => {
    expect(isNtfsDot(name, 'gitmodules', 'gi7eba')).toBe(false);
    expect(gitControlFileAlias(name) === '.gitmodules').toBe(false);
  });

  it.each([
    ['.gitattributes', ['.gitattributes', `.git${u200c}attributes`, '.Gitattributes', '.gitattributeS', 'GITATT~1', 'GI7D29~1']],
    ['.gitignore', ['.gitignore', `.git${u200c}ignore`, '.Gitignore', '.gitignorE', 'GITIGN~1', 'GI250A~1']],
    ['.mailmap', ['.mailmap', `.mail${u200c}map`, '.Mailmap', '.mailmaP', 'MAILMA~1', 'MABA30~1']],
  ] as const)('%s aliases', (control, names) => {
    for (const name of names) {
      expect(gitControlFileAlias(name), name).toBe(control);
      expect(unsafeSymlinkReason(name), name).toBeDefined();
      if (name !== control) expect(unsafePathReason(name), name).toBeDefined();
    }
    expect(unsafeSymlinkReason('notes.txt')).toBeUndefined();
  });
});

describe('Windows names (t0060 is_valid_path on Windows)', () => {
  const valid = ['win32', 'win32 x', 'comm', 'conout.c', 'com0.c', 'lptN'];
  const invalid = ['win32 ', 'win32 /x ', 'win32.', 'win32 . .', '.../hello.txt', 'colon:test', 'AUX.c', 'abc/conOut$  .xyz/test', 'lpt8', 'com9.c', 'lpt*', 'Nul', 'PRN./abc'];
  it.each(valid)('keeps %j', (p) => expect(unsafePathReason(p)).toBeUndefined());
  it.each(invalid)('refuses %j', (p) => expect(unsafePathReason(p)).toBeDefined());

  it('refuses every device name in any case, with extensions, spaces and streams, in any folder', () => {
    for (const dev of ['CON', 'PRN', 'AUX', 'NUL', 'CONIN$', 'CONOUT$', ...[1, 2, 3, 4, 5, 6, 7, 8, 9].flatMap((n) => [`COM${n}`, `LPT${n}`])]) {
      for (const name of [dev, dev.toLowerCase(), `${dev}.txt`, `${dev} .txt`, `${dev}:x`, `${dev}.tar.gz`]) {
        expect(windowsNameReason(name), name).toBeDefined();
        expect(unsafePathReason(`docs/${name}/readme`), name).toBeDefined();
      }
    }
    for (const name of ['console.log', 'auxiliary', 'nullable.ts', 'com10', 'lpt0', 'prn-list']) expect(windowsNameReason(name), name).toBeUndefined();
  });

  it('refuses characters Windows cannot store and control characters', () => {
    for (const c of [':', '<', '>', '"', '|', '?', '*', '\x01', '\x1f']) expect(unsafePathReason(`a${c}b.txt`), JSON.stringify(c)).toBeDefined();
  });
});
