/**
 * A TLS failure in setup or a build, named with what to do (docs/architecture.md §16, "Behind a TLS
 * proxy"). Read from the command's own output on the host: the words only choose a hint in Airlock's
 * message, nothing is decided from them.
 */

/** What npm, pip, curl, git, Go, Cargo and OpenSSL print when a certificate is not trusted. */
const TLS_FAILURE = /UNABLE_TO_GET_ISSUER_CERT(_LOCALLY)?|SELF_SIGNED_CERT_IN_CHAIN|DEPTH_ZERO_SELF_SIGNED_CERT|UNABLE_TO_VERIFY_LEAF_SIGNATURE|CERT_UNTRUSTED|unable to get local issuer certificate|self[- ]signed certificate in certificate chain|certificate verify failed|SSL certificate problem|x509: certificate signed by unknown authority|server certificate verification failed|invalid peer certificate: UnknownIssuer/i;

/** The hint a failure's message carries when its output shows a certificate the sandbox does not trust, else undefined. */
export function tlsFailureHint(output: string): string | undefined {
  if (!TLS_FAILURE.test(output)) return undefined;
  return (
    'This is a TLS failure: the server (or a proxy between it and this machine that re-signs TLS, as company networks do) presented a certificate the sandbox does not trust. ' +
    "Airlock puts the CAs this machine adds beyond the public ones in every sandbox (its system store and NODE_EXTRA_CA_CERTS, SSL_CERT_FILE, REQUESTS_CA_BUNDLE, GIT_SSL_CAINFO): install your company's CA on this machine " +
    '(a .crt file in /usr/local/share/ca-certificates, or NODE_EXTRA_CA_CERTS pointing at it) and run again; Airlock rebuilds its image and the project environment with it. ' +
    "A devcontainer Dockerfile's own RUN steps get it too (as NODE_EXTRA_CA_CERTS, SSL_CERT_FILE, REQUESTS_CA_BUNDLE, GIT_SSL_CAINFO, CURL_CA_BUNDLE build arguments): a tool that reads none of them needs the CA added in the Dockerfile, or the download moved to postCreateCommand."
  );
}
