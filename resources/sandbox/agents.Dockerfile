# The "agents" variant: the base image plus the third-party agent CLIs. Built on demand by
# core/sandbox/image.ts with BASE set to the base image's tag (which names its architecture).
ARG BASE
FROM ${BASE}
# Both CLIs ship their native program as per-platform optional dependencies, which npm installs for
# the build's own architecture and silently skips when none fits: run each once so a missing one
# fails the build here, not the user's first run (docs/architecture.md §4 "Image architecture").
ARG AIRLOCK_ARCH
USER root
RUN npm install -g --no-audit --no-fund --no-update-notifier @anthropic-ai/claude-code @openai/codex \
 && rm -rf /root/.npm /root/.cache \
 && for cli in claude codex; do "$cli" --version >/dev/null 2>&1 || { echo "Airlock: $cli does not run on $(dpkg --print-architecture) (asked for ${AIRLOCK_ARCH:-?}): its native package for this architecture is missing" >&2; exit 1; }; done
USER 1000:1000
