import { useEffect, useRef, useState, type KeyboardEvent } from 'react';
import type { SearchAddon } from '@xterm/addon-search';
import type { ResolvedTheme } from '../lib/theme';
import { searchDecorations } from '../terminal/xterm-theme';

/** "3 of 12", "No results", or nothing before the first search. */
export function matchLabel(query: string, result: { resultIndex: number; resultCount: number } | undefined): string {
  if (!query || !result) return '';
  if (result.resultCount === 0) return 'No results';
  // The addon stops counting past its highlight limit and then reports index -1.
  if (result.resultIndex < 0) return `${result.resultCount}+ matches`;
  return `${result.resultIndex + 1} of ${result.resultCount}`;
}

/** The search box of a terminal: type to find, Enter / Shift+Enter for next / previous, Esc closes. */
export function TerminalSearch({ search, theme, label, onClose }: { search: SearchAddon; theme: ResolvedTheme; label: string; onClose(): void }) {
  const [query, setQuery] = useState('');
  const [result, setResult] = useState<{ resultIndex: number; resultCount: number }>();
  const input = useRef<HTMLInputElement>(null);

  useEffect(() => {
    input.current?.focus();
    input.current?.select();
    const sub = search.onDidChangeResults((r) => setResult(r));
    return () => sub.dispose();
  }, [search]);

  const find = (q: string, direction: 'next' | 'previous', incremental = false) => {
    if (!q) {
      search.clearDecorations();
      setResult(undefined);
      return;
    }
    const options = { decorations: searchDecorations(theme), incremental };
    if (direction === 'next') search.findNext(q, options);
    else search.findPrevious(q, options);
  };

  const onKeyDown = (e: KeyboardEvent<HTMLInputElement>) => {
    if (e.key === 'Enter') {
      e.preventDefault();
      find(query, e.shiftKey ? 'previous' : 'next');
    } else if (e.key === 'Escape') {
      e.preventDefault();
      onClose();
    }
  };

  return (
    <div className="terminal-search" role="search" aria-label={`Search ${label}`}>
      <input
        ref={input}
        type="search"
        aria-label={`Search ${label}`}
        placeholder="Search"
        value={query}
        onChange={(e) => {
          setQuery(e.target.value);
          find(e.target.value, 'next', true);
        }}
        onKeyDown={onKeyDown}
      />
      <span className="muted search-count" role="status" aria-label="Matches">{matchLabel(query, result)}</span>
      <button className="btn small" aria-label="Previous match" title="Previous (Shift+Enter)" disabled={!query} onClick={() => find(query, 'previous')}>↑</button>
      <button className="btn small" aria-label="Next match" title="Next (Enter)" disabled={!query} onClick={() => find(query, 'next')}>↓</button>
      <button className="btn small" aria-label="Close search" title="Close (Esc)" onClick={onClose}>×</button>
    </div>
  );
}
