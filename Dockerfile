# syntax=docker/dockerfile:1
# `kuuki serve` as a container: Slack over Socket Mode and Discord over the Gateway
# need no inbound port; the data file lives on a volume. Not built or run on the
# project's own machines (they have no Docker engine): see docs/self-hosting.md.
#   docker build -t kuuki .
#   docker run -d --name kuuki --restart unless-stopped -v kuuki-data:/data \
#     -e SLACK_APP_TOKEN=xapp-… -e SLACK_BOT_TOKEN=xoxb-… -e OPENAI_API_KEY=… \
#     -e LLM_PROVIDER=openai -e PROMPT_LANGUAGE=en kuuki

FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p kuuki-cli --bin kuuki \
    && cp target/release/kuuki /kuuki \
    && mkdir /data

# glibc and CA roots only (TLS is rustls with its own roots; SQLite is compiled in);
# runs as an unprivileged user that owns the data folder.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /kuuki /usr/local/bin/kuuki
COPY --from=build --chown=65532:65532 /data /data
VOLUME /data
ENV DATA_PATH=/data/kuuki.db
# /healthz and /metrics (docs/self-hosting.md); Slack's Events API and Discord's
# interactions endpoint need a public URL pointing here when Socket Mode or the
# Gateway are not used.
EXPOSE 3000
# docker stop sends SIGTERM: kuuki stops taking events and gives running jobs 8 s,
# inside Docker's default 10 s.
ENTRYPOINT ["/usr/local/bin/kuuki", "serve", "--listen", "0.0.0.0:3000"]
