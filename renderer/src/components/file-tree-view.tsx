import { useMemo } from 'react';
import type { ChangedFile } from '../../../contracts';
import { buildFileTree, type TreeNode } from '../lib/file-tree';

const MARK: Record<ChangedFile['status'], string> = { added: 'A', modified: 'M', deleted: 'D', renamed: 'R', 'type-changed': 'T' };

function Node({ node, selected, onSelect }: { node: TreeNode; selected?: string; onSelect(path: string): void }) {
  if (node.file) {
    const f = node.file;
    return (
      <li>
        <button className="tree-file" role="treeitem" aria-selected={selected === f.path} onClick={() => onSelect(f.path)} title={f.risky ?? f.path} data-path={f.path}>
          <span className={`st ${f.status}`}>{MARK[f.status]}</span>
          <span>{node.name}</span>
          {f.risky && <span className="risk-reason" aria-label="risky">⚠</span>}
          <span className="counts">{f.binary ? 'bin' : <><span className="add-n">+{f.additions}</span> <span className="del-n">-{f.deletions}</span></>}</span>
        </button>
      </li>
    );
  }
  return (
    <li>
      <div className="muted" style={{ padding: '2px 4px' }}>{node.name}/</div>
      <ul role="group">{node.children.map((c) => <Node key={c.path} node={c} selected={selected} onSelect={onSelect} />)}</ul>
    </li>
  );
}

/** The changed files of a run as a directory tree; `final`: the run has ended (no "yet"). */
export function FileTreeView({ files, selected, onSelect, final = false }: { files: readonly ChangedFile[]; selected?: string; onSelect(path: string): void; final?: boolean }) {
  const tree = useMemo(() => buildFileTree(files), [files]);
  if (files.length === 0) return <div className="empty">{final ? 'The run changed no files.' : 'No changed files yet.'}</div>;
  return (
    <div className="tree" role="tree" aria-label="Changed files">
      <ul>{tree.children.map((c) => <Node key={c.path} node={c} selected={selected} onSelect={onSelect} />)}</ul>
    </div>
  );
}
