/** The parts of an xterm buffer that reading it as text needs. */
export interface TextBuffer {
  readonly length: number;
  getLine(y: number): { readonly isWrapped: boolean; translateToString(trimRight?: boolean): string } | undefined;
}

/**
 * The whole buffer (scrollback and screen) as text: rows the terminal wrapped are joined back into
 * one line, trailing blanks and trailing empty rows are left out.
 */
export function bufferText(buffer: TextBuffer): string {
  const lines: string[] = [];
  for (let y = 0; y < buffer.length; y++) {
    const line = buffer.getLine(y);
    if (!line) continue;
    const text = line.translateToString(true);
    if (line.isWrapped && lines.length) lines[lines.length - 1] += text;
    else lines.push(text);
  }
  while (lines.length && !lines[lines.length - 1]) lines.pop();
  return lines.join('\n');
}
