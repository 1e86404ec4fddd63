import { useEffect, useState } from 'react';
import type { FolderListing } from '../../../contracts';
import { errorMessage } from '../api';
import { useRecordsStore } from '../stores/records-store';

/**
 * Browses folders under the user's home on the host (`projects:listFolders`): where the page has
 * no system folder dialog (the browser UI). Names only; the host refuses anything outside home.
 */
export function FolderBrowser({ start, onChoose, onCancel }: { start?: string; onChoose(path: string): void; onCancel(): void }) {
  const [listing, setListing] = useState<FolderListing>();
  const [error, setError] = useState<string>();
  const open = (path?: string) => {
    useRecordsStore.getState().listFolders(path).then(
      (l) => { setListing(l); setError(undefined); },
      (err) => {
        setError(errorMessage(err));
        // A typed path outside home (or gone): start from home instead.
        if (path && !listing) open();
      },
    );
  };
  useEffect(() => open(start || undefined), []); // once, at the starting folder

  const join = (name: string) => (listing ? `${listing.path.replace(/[\\/]+$/, '')}/${name}` : name);
  return (
    <div className="panel folder-browser" role="dialog" aria-label="Choose a project folder">
      <div className="row spread">
        <span className="mono" aria-label="Current folder">{listing?.path ?? '…'}</span>
        <span className="row" style={{ gap: 6 }}>
          <button type="button" className="btn small" disabled={!listing?.parent} onClick={() => listing?.parent && open(listing.parent)}>Up</button>
          <button type="button" className="btn small primary" disabled={!listing} onClick={() => listing && onChoose(listing.path)}>Choose this folder</button>
          <button type="button" className="btn small" onClick={onCancel}>Cancel</button>
        </span>
      </div>
      {error && <div className="del-n" role="alert">{error}</div>}
      <ul className="folder-list" aria-label="Folders">
        {listing?.folders.map((name) => (
          <li key={name}>
            <button type="button" className="folder-item" onClick={() => open(join(name))} onDoubleClick={() => onChoose(join(name))}>{name}</button>
          </li>
        ))}
        {listing && listing.folders.length === 0 && <li className="muted">No folders inside.</li>}
      </ul>
      {listing?.truncated && <div className="muted">Only the first 1000 folders are listed; type the path for others.</div>}
      <div className="muted" style={{ fontSize: 12 }}>Folders inside your home folder ({listing?.home ?? '~'}); for a folder elsewhere, type its path.</div>
    </div>
  );
}
