import type { ITheme } from '@xterm/xterm';
import type { ResolvedTheme } from '../lib/theme';

// The terminal's colours follow the app's (styles.css `--term-*`); the ANSI palettes keep each
// colour readable on its background.
const DARK: ITheme = {
  background: '#0d1117', foreground: '#e6edf3', cursor: '#e6edf3', cursorAccent: '#0d1117',
  selectionBackground: '#264f78', selectionInactiveBackground: '#2b3f5c',
  black: '#484f58', red: '#ff7b72', green: '#3fb950', yellow: '#d29922', blue: '#58a6ff', magenta: '#bc8cff', cyan: '#39c5cf', white: '#b1bac4',
  brightBlack: '#6e7681', brightRed: '#ffa198', brightGreen: '#56d364', brightYellow: '#e3b341', brightBlue: '#79c0ff', brightMagenta: '#d2a8ff', brightCyan: '#56d4dd', brightWhite: '#ffffff',
};

const LIGHT: ITheme = {
  background: '#fbfcfd', foreground: '#1b1f24', cursor: '#1b1f24', cursorAccent: '#fbfcfd',
  selectionBackground: '#b6d4fe', selectionInactiveBackground: '#cfe0fa',
  black: '#24292f', red: '#cf222e', green: '#116329', yellow: '#7d4e00', blue: '#0969da', magenta: '#8250df', cyan: '#1b7c83', white: '#6e7781',
  brightBlack: '#57606a', brightRed: '#a40e26', brightGreen: '#1a7f37', brightYellow: '#633c01', brightBlue: '#218bff', brightMagenta: '#a475f9', brightCyan: '#3192aa', brightWhite: '#8c959f',
};

export function xtermTheme(theme: ResolvedTheme): ITheme {
  return theme === 'dark' ? DARK : LIGHT;
}

/** Search highlights, per theme (the search addon draws them as decorations). */
export function searchDecorations(theme: ResolvedTheme) {
  return theme === 'dark'
    ? { matchBackground: '#6e5a00', matchOverviewRuler: '#d29922', activeMatchBackground: '#e3b341', activeMatchColorOverviewRuler: '#ffa657' }
    : { matchBackground: '#fff1a8', matchOverviewRuler: '#d4a72c', activeMatchBackground: '#ffb000', activeMatchColorOverviewRuler: '#bc4c00' };
}
