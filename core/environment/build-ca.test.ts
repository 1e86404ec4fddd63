import { describe, expect, it } from 'vitest';
import { BUILD_CA_BUNDLE, CA_VARIABLES, withHostCas } from './build-ca';

const REF = 'airlock-sandbox:amd64-0123456789abcdef0123';
const PRELUDE = [
  `COPY --from=${REF} /usr/local/share/ca-certificates/airlock-host/ /usr/local/share/ca-certificates/airlock-host/`,
  `COPY --from=${REF} /etc/ssl/certs/ca-certificates.crt ${BUILD_CA_BUNDLE}`,
  ...CA_VARIABLES.map((v) => `ARG ${v}=${BUILD_CA_BUNDLE}`),
];

describe('the host CAs in a devcontainer Dockerfile (docs/architecture.md §16, "Behind a TLS proxy")', () => {
  it('follows every FROM (each stage) with the CA files and the variables as build arguments, and changes nothing else', () => {
    const text = ['# syntax=docker/dockerfile:1', 'ARG BASE=debian:bookworm-slim', 'FROM ${BASE} AS build', 'RUN make', 'from --platform=$BUILDPLATFORM scratch', 'COPY --from=build /out /out', ''].join('\n');
    expect(withHostCas(text, REF).split('\n')).toEqual(['# syntax=docker/dockerfile:1', 'ARG BASE=debian:bookworm-slim', 'FROM ${BASE} AS build', ...PRELUDE, 'RUN make', 'from --platform=$BUILDPLATFORM scratch', ...PRELUDE, 'COPY --from=build /out /out', '']);
    expect(CA_VARIABLES).toEqual(['NODE_EXTRA_CA_CERTS', 'SSL_CERT_FILE', 'REQUESTS_CA_BUNDLE', 'GIT_SSL_CAINFO', 'CURL_CA_BUNDLE']);
  });

  it('reads continuations (with the escape directive) and heredocs as the builder does: a FROM inside them is not an instruction', () => {
    const text = ['FROM \\', '  # a comment inside', '  debian:bookworm-slim', 'RUN echo \\', 'FROM not-an-instruction', 'RUN <<EOF', 'FROM also-not', 'EOF', 'RUN <<-"END" cat', '\tFROM nor-this', '\tEND', 'CMD ["x"]'].join('\n');
    const out = withHostCas(text, REF).split('\n');
    expect(out.filter((l) => l.startsWith('COPY --from=') && l.includes('ca-certificates.crt'))).toHaveLength(1);
    expect(out.slice(0, 3 + PRELUDE.length)).toEqual(['FROM \\', '  # a comment inside', '  debian:bookworm-slim', ...PRELUDE]);
    expect(out.slice(3 + PRELUDE.length)).toEqual(text.split('\n').slice(3));
    const backtick = ['# escape=`', 'FROM `', '  mcr-like/image', 'RUN dir'].join('\n');
    expect(withHostCas(backtick, REF).split('\n')).toEqual(['# escape=`', 'FROM `', '  mcr-like/image', ...PRELUDE, 'RUN dir']);
  });
});
