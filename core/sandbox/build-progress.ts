import type { ImageProgress } from './driver';

/** One JSON line of the engine's /build output (classic builder and Podman's compat API). */
export interface BuildLine {
  stream?: string;
  status?: string;
  error?: string;
  errorDetail?: { code?: number; message?: string };
  aux?: { ID?: string };
}

const STEP = /^(?:Step|STEP)\s+(\d+)\/(\d+)\s*:\s*(.*)$/;

/**
 * Turns build output into progress events and remembers the output of the current step, so a
 * failure can show the failing step and the tail of what it printed.
 */
export class BuildProgressParser {
  step = 0;
  totalSteps = 0;
  stepTitle = '';
  private stepOutput: string[] = [];
  private partial = '';
  error: string | undefined;

  constructor(
    private readonly emit: (p: ImageProgress) => void,
    private readonly variant: ImageProgress['variant'],
  ) {}

  /** Feeds raw bytes of the build response (newline-delimited JSON, possibly split anywhere). */
  feed(chunk: string): void {
    this.partial += chunk;
    let nl: number;
    while ((nl = this.partial.indexOf('\n')) >= 0) {
      const line = this.partial.slice(0, nl).trim();
      this.partial = this.partial.slice(nl + 1);
      if (line) this.line(line);
    }
  }

  end(): void {
    const rest = this.partial.trim();
    this.partial = '';
    if (rest) this.line(rest);
  }

  private line(raw: string): void {
    let msg: BuildLine;
    try {
      msg = JSON.parse(raw) as BuildLine;
    } catch {
      msg = { stream: raw };
    }
    if (msg.error || msg.errorDetail?.message) {
      this.error = msg.errorDetail?.message ?? msg.error;
      return;
    }
    const text = msg.stream ?? msg.status;
    if (!text) return;
    for (const l of text.split('\n')) {
      const line = l.replace(/\r/g, '').trimEnd();
      if (!line) continue;
      const m = STEP.exec(line.trim());
      if (m) {
        this.step = Number(m[1]);
        this.totalSteps = Number(m[2]);
        this.stepTitle = (m[3] ?? '').trim();
        this.stepOutput = [];
        this.emit({
          phase: 'build',
          message: `step ${this.step}/${this.totalSteps}: ${truncate(this.stepTitle, 100)}`,
          step: this.step,
          totalSteps: this.totalSteps,
          fraction: this.totalSteps ? (this.step - 1) / this.totalSteps : undefined,
          variant: this.variant,
        });
        continue;
      }
      this.stepOutput.push(line);
      if (this.stepOutput.length > 400) this.stepOutput.splice(0, this.stepOutput.length - 200);
      this.emit({
        phase: 'build',
        message: truncate(line, 200),
        step: this.step || undefined,
        totalSteps: this.totalSteps || undefined,
        fraction: this.totalSteps ? (this.step - 1) / this.totalSteps : undefined,
        variant: this.variant,
      });
    }
  }

  /** The last `n` lines printed by the current (failing) step. */
  outputTail(n = 25): string {
    return this.stepOutput.slice(-n).join('\n');
  }
}

function truncate(s: string, n: number): string {
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}

/** Feeds an engine build's JSON stream to `parser` until it ends (Airlock's image and derived environments alike). */
export function consumeBuildStream(stream: NodeJS.ReadableStream, parser: BuildProgressParser): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    stream.setEncoding?.('utf8');
    stream.on('data', (c: Buffer | string) => parser.feed(typeof c === 'string' ? c : c.toString('utf8')));
    stream.on('end', () => {
      parser.end();
      resolve();
    });
    stream.on('error', reject);
  });
}
