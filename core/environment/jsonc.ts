import { parse, printParseErrorCode, type ParseError } from 'jsonc-parser';
import { AirlockError } from '../../contracts/errors';

/** 1-based line and column of a character offset. */
export function lineColumn(text: string, offset: number): { line: number; column: number } {
  let line = 1;
  let lineStart = 0;
  for (let i = 0; i < offset && i < text.length; i++) {
    if (text.charCodeAt(i) === 10) {
      line++;
      lineStart = i + 1;
    }
  }
  return { line, column: offset - lineStart + 1 };
}

/**
 * Parses JSON with comments and trailing commas, as devcontainer.json allows (jsonc-parser, the
 * parser VS Code uses). A syntax error is INVALID_INPUT naming the file, line and column.
 */
export function parseJsonc(text: string, file: string): unknown {
  const errors: ParseError[] = [];
  const value: unknown = parse(text, errors, { allowTrailingComma: true, disallowComments: false, allowEmptyContent: false });
  const first = errors[0];
  if (first) {
    const { line, column } = lineColumn(text, first.offset);
    const more = errors.length > 1 ? ` (and ${errors.length - 1} more)` : '';
    throw new AirlockError('INVALID_INPUT', `${file}:${line}:${column}: ${describe(printParseErrorCode(first.error))}${more}. Fix the file, or choose another environment (--environment airlock).`, { field: 'environment' });
  }
  return value;
}

function describe(code: string): string {
  // 'CloseBraceExpected' → 'close brace expected'
  return code.replace(/([a-z])([A-Z])/g, '$1 $2').toLowerCase();
}
