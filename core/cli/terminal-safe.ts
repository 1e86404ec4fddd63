/**
 * Bytes from the sandbox and the model reach the user's terminal only as text (docs/architecture.md
 * §12): SGR colours (`ESC [ … m`) pass; every other escape sequence — OSC (OSC 52 writes the
 * clipboard), DCS, APC, PM, SOS, cursor movement and other CSI — and every C0/C1 control but newline
 * and tab (and CR before LF) is shown escaped (`\x1b[2J`), never interpreted. Stateful: a sequence
 * split across writes is judged whole.
 */
export class TerminalSafeText {
  private pending = '';

  /** The safe form of `text`; an unfinished sequence at the end waits for the next call. */
  push(text: string): string {
    const s = this.pending + text;
    this.pending = '';
    let out = '';
    let i = 0;
    while (i < s.length) {
      const c = s.charCodeAt(i);
      if (c === 0x1b) {
        const end = sequenceEnd(s, i);
        if (end === undefined) {
          // Unfinished: wait for more, unless it is already too long to be harmless text.
          if (s.length - i <= MAX_SEQUENCE) {
            this.pending = s.slice(i);
            return out;
          }
          out += shown(s.slice(i, i + MAX_SEQUENCE));
          i += MAX_SEQUENCE;
          continue;
        }
        const seq = s.slice(i, end);
        out += SGR.test(seq) ? seq : shown(seq);
        i = end;
        continue;
      }
      if (c === 0x0d) {
        if (i + 1 >= s.length) {
          this.pending = '\r';
          return out;
        }
        out += s.charCodeAt(i + 1) === 0x0a ? '\r' : '\\r';
        i++;
        continue;
      }
      if ((c < 0x20 && c !== 0x0a && c !== 0x09) || c === 0x7f || (c >= 0x80 && c <= 0x9f)) out += shown(s[i] as string);
      else out += s[i];
      i++;
    }
    return out;
  }

  /** Whatever is held back, shown escaped (the stream ended mid-sequence). */
  end(): string {
    const rest = this.pending;
    this.pending = '';
    return rest === '\r' ? '\\r' : shown(rest);
  }
}

const MAX_SEQUENCE = 4096;
/** Colours and text attributes only. */
const SGR = /^\x1b\[[0-9;:]{0,64}m$/;

/** Where the escape sequence starting at `i` ends (exclusive), or undefined when it is unfinished. */
function sequenceEnd(s: string, i: number): number | undefined {
  const kind = s[i + 1];
  if (kind === undefined) return undefined;
  if (kind === '[') {
    for (let j = i + 2; j < s.length; j++) {
      const c = s.charCodeAt(j);
      if (c >= 0x40 && c <= 0x7e) return j + 1;
      if (c < 0x20 || c > 0x3f) return j; // not a CSI byte: the sequence is broken here
    }
    return undefined;
  }
  if (kind === ']' || kind === 'P' || kind === '_' || kind === '^' || kind === 'X') {
    // A string until BEL or ST (ESC \).
    for (let j = i + 2; j < s.length; j++) {
      if (s.charCodeAt(j) === 0x07) return j + 1;
      if (s.charCodeAt(j) === 0x1b) return s[j + 1] === undefined ? undefined : s[j + 1] === '\\' ? j + 2 : j;
    }
    return undefined;
  }
  return i + 2;
}

/** Every control character in `text` written out as visible text. */
function shown(text: string): string {
  let out = '';
  for (const ch of text) {
    const c = ch.codePointAt(0) as number;
    if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else if (c >= 0x80 && c <= 0x9f) out += `\\u${c.toString(16).padStart(4, '0')}`;
    else out += ch;
  }
  return out;
}

/** One whole piece of untrusted text (a command line, a path, a message), made safe. */
export function safeTerminalText(text: string): string {
  const f = new TerminalSafeText();
  return f.push(text) + f.end();
}
