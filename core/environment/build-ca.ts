/**
 * The host's extra CAs in a devcontainer Dockerfile's own `RUN` steps (docs/architecture.md §16,
 * "Behind a TLS proxy"). The build gets a rewritten copy of the project's Dockerfile: after each `FROM`,
 * every stage copies Airlock's CA material from Airlock's own image (which carries the host's extras,
 * core/sandbox/image.ts) and declares the usual variables as build arguments pointing at it. Build
 * arguments, not `ENV`: they reach the stage's `RUN` steps and are not kept in the image's
 * configuration, and an `ENV` of the same name (the image's own choice) wins over them. Only when the
 * host has extras: otherwise the project's Dockerfile is built as written.
 */

/** Where the rewritten Dockerfile goes in the build context (at its root, beside the project's files). */
export const HOST_CA_DOCKERFILE = '.airlock-host-ca.Dockerfile';

/** Airlock's public roots plus the host's extras, inside each stage of a rewritten build. */
export const BUILD_CA_BUNDLE = '/opt/airlock-build-ca/bundle.pem';

/** The variables tools read a CA bundle from: Node, OpenSSL (and Python's ssl), requests, git, curl. */
export const CA_VARIABLES = ['NODE_EXTRA_CA_CERTS', 'SSL_CERT_FILE', 'REQUESTS_CA_BUNDLE', 'GIT_SSL_CAINFO', 'CURL_CA_BUNDLE'] as const;

/** What follows each FROM: the host's CAs into the stage's store folder (for its own `update-ca-certificates`), the bundle, the variables. */
function stagePrelude(airlockRef: string): string[] {
  return [
    `COPY --from=${airlockRef} /usr/local/share/ca-certificates/airlock-host/ /usr/local/share/ca-certificates/airlock-host/`,
    `COPY --from=${airlockRef} /etc/ssl/certs/ca-certificates.crt ${BUILD_CA_BUNDLE}`,
    ...CA_VARIABLES.map((v) => `ARG ${v}=${BUILD_CA_BUNDLE}`),
  ];
}

/**
 * The Dockerfile with the prelude after each `FROM` instruction. Reads it as the builder does: parser
 * directives (`# escape=`) at the top, line continuations, comment lines inside an instruction, and
 * heredocs (`RUN <<EOF … EOF`), whose lines are never taken for instructions.
 */
export function withHostCas(dockerfile: string, airlockRef: string): string {
  const lines = dockerfile.split('\n');
  let escape = '\\';
  for (const line of lines) {
    const d = /^#\s*([a-z]+)\s*=\s*(\S+)\s*$/i.exec(line.trim());
    if (!d) break;
    if (d[1]!.toLowerCase() === 'escape') escape = d[2]!;
  }
  const out: string[] = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i]!;
    const trimmed = line.trim();
    if (trimmed === '' || trimmed.startsWith('#')) {
      out.push(line);
      i++;
      continue;
    }
    // One instruction: its first line, continuation lines (comments inside it are kept), then any heredoc bodies.
    const instruction = [line];
    let text = line;
    while (text.trimEnd().endsWith(escape) && i + 1 < lines.length) {
      i++;
      instruction.push(lines[i]!);
      if (!lines[i]!.trim().startsWith('#')) text = lines[i]!;
    }
    i++;
    const joined = instruction.join('\n');
    for (const m of joined.matchAll(/<<(-?)\s*["']?([A-Za-z_][A-Za-z0-9_]*)["']?/g)) {
      if (!/^\s*(RUN|COPY|ADD)\b/i.test(line)) break;
      const strip = m[1] === '-';
      while (i < lines.length) {
        const body = lines[i]!;
        instruction.push(body);
        i++;
        if ((strip ? body.replace(/^\t+/, '') : body).replace(/\r$/, '') === m[2]) break;
      }
    }
    out.push(...instruction);
    if (/^\s*FROM\s/i.test(line)) out.push(...stagePrelude(airlockRef));
  }
  return out.join('\n');
}
