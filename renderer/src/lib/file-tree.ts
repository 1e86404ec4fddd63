import type { ChangedFile } from '../../../contracts';

export interface TreeNode {
  name: string;
  path: string;
  file?: ChangedFile;
  children: TreeNode[];
}

/** Builds a directory tree of changed files; folders first, then files, each sorted by name. */
export function buildFileTree(files: readonly ChangedFile[]): TreeNode {
  const root: TreeNode = { name: '', path: '', children: [] };
  for (const file of files) {
    const parts = file.path.split('/');
    let node = root;
    parts.forEach((part, i) => {
      const path = parts.slice(0, i + 1).join('/');
      if (i === parts.length - 1) {
        node.children.push({ name: part, path, file, children: [] });
        return;
      }
      let dir = node.children.find((c) => !c.file && c.name === part);
      if (!dir) {
        dir = { name: part, path, children: [] };
        node.children.push(dir);
      }
      node = dir;
    });
  }
  const sort = (n: TreeNode) => {
    n.children.sort((a, b) => Number(Boolean(a.file)) - Number(Boolean(b.file)) || a.name.localeCompare(b.name));
    n.children.forEach(sort);
  };
  sort(root);
  return root;
}

/** Risky files first, then by path; risky files are not pre-selected for apply. */
export function orderForReview(files: readonly ChangedFile[]): ChangedFile[] {
  return [...files].sort((a, b) => Number(Boolean(b.risky)) - Number(Boolean(a.risky)) || a.path.localeCompare(b.path));
}

export function defaultSelection(files: readonly ChangedFile[]): Set<string> {
  return new Set(files.filter((f) => !f.risky).map((f) => f.path));
}
