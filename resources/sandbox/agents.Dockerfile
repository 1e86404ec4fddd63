# The "agents" variant: the base image plus the third-party agent CLIs. Built on demand by
# core/sandbox/image.ts with BASE set to the base image's content-hash tag.
ARG BASE
FROM ${BASE}
USER root
RUN npm install -g --no-audit --no-fund --no-update-notifier @anthropic-ai/claude-code @openai/codex \
 && rm -rf /root/.npm /root/.cache
USER 1000:1000
