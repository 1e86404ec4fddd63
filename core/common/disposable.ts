/** Something that holds a resource (subscription, stream, child process) until disposed. */
export interface Disposable {
  dispose(): void;
}

/** Wraps a function as a Disposable that runs it at most once. */
export function toDisposable(fn: () => void): Disposable {
  let done = false;
  return {
    dispose() {
      if (done) return;
      done = true;
      fn();
    },
  };
}

/** Collects disposables and disposes them together, last added first. */
export class DisposableStore implements Disposable {
  private readonly items: Disposable[] = [];
  private disposed = false;

  add<T extends Disposable>(item: T): T {
    if (this.disposed) {
      item.dispose();
    } else {
      this.items.push(item);
    }
    return item;
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const item of this.items.splice(0).reverse()) {
      try {
        item.dispose();
      } catch {
        // One failing disposer must not keep the others from running.
      }
    }
  }
}

/** A typed event: subscribe with a listener, get a Disposable back. */
export type Event<T> = (listener: (e: T) => void) => Disposable;

/** Owns the listeners of one Event; `event` is what to expose publicly. */
export class Emitter<T> implements Disposable {
  private listeners = new Set<(e: T) => void>();

  readonly event: Event<T> = (listener) => {
    this.listeners.add(listener);
    return toDisposable(() => this.listeners.delete(listener));
  };

  fire(e: T): void {
    for (const listener of [...this.listeners]) {
      try {
        listener(e);
      } catch {
        // A throwing listener must not break the emitter or the other listeners.
      }
    }
  }

  get hasListeners(): boolean {
    return this.listeners.size > 0;
  }

  dispose(): void {
    this.listeners.clear();
  }
}
