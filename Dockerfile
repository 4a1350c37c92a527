# syntax=docker/dockerfile:1
#
# agentexec's container image: `agentexec serve` on 0.0.0.0:8765 as the
# non-root user 65532, the bearer token read from a mounted file
# (/var/run/secrets/agentexec/token: a Kubernetes Secret), the workspace at
# /workspace.
#
#   docker build -t agentexec .
#   openssl rand -hex 32 > token
#   docker run --rm -p 8765:8765 -v "$PWD/token:/var/run/secrets/agentexec/token:ro" \
#     -v "$PWD:/workspace" agentexec
#
# The base is Debian slim, not distroless: the agent's commands run inside
# this container, so it needs a shell (the bash tool runs `bash -c`), git and
# CA certificates at least; extend it with your toolchains (FROM agentexec,
# then apt-get install ...), or copy the two static binaries into your own
# image: COPY --from=agentexec /usr/local/bin/agentexec* /usr/local/bin/
# (`--target binaries` builds an image holding only them). deploy/image
# builds the same agentexec layer on an empty base without a daemon, for CI;
# deploy/image/image.go's constants and this file are held together by its
# tests.

ARG GO_VERSION=1.26
ARG DEBIAN=trixie

FROM golang:${GO_VERSION}-${DEBIAN} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static binaries: no libc, no loader, nothing from the base image.
RUN CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/agentexec ./cmd/agentexec-sandbox

# Only the binaries, for COPY --from in other images.
FROM scratch AS binaries
COPY --from=build /out/agentexec /out/agentexec-sandbox /usr/local/bin/

FROM debian:${DEBIAN}-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends bash ca-certificates git procps \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 65532 agentexec \
 && useradd --uid 65532 --gid 65532 --home-dir /home/agentexec --create-home --shell /bin/bash agentexec \
 && install -d -o 65532 -g 65532 -m 0755 /workspace
COPY --from=build /out/agentexec /out/agentexec-sandbox /usr/local/bin/
COPY deploy/image/config.toml /etc/agentexec/config.toml
ENV HOME=/home/agentexec AGENTEXEC_CONFIG=/etc/agentexec/config.toml
USER 65532:65532
WORKDIR /workspace
EXPOSE 8765
STOPSIGNAL SIGTERM
ENTRYPOINT ["agentexec", "serve"]
CMD ["--listen", "0.0.0.0:8765", "--token-file", "/var/run/secrets/agentexec/token"]
