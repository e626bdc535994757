# bloomstage container image: built on Debian 12 slim with the compilers,
# runs on Debian 12 slim with only the runtime libraries (two stages; no
# package lists or caches kept).  `scripts/container build` builds it from
# the working tree (and, offline, makes debian:12-slim first).
#
#   docker build -t bloomstage .
#   docker run --rm -v bloomstage-ckpt:/var/lib/bloomstage \
#     -e BLOOMSTAGE_KAFKA_BOOTSTRAP_SERVERS=kafka:9092 \
#     -e BLOOMSTAGE_INPUT_TOPICS=events -e BLOOMSTAGE_OUTPUT_TOPIC=events-unique \
#     bloomstage
#
# Configuration: the mounted file /etc/bloomstage/bloomstage.conf (the
# documented sample by default, every key commented out) and BLOOMSTAGE_*
# environment variables, which override it.  Checkpoints live in the volume
# /var/lib/bloomstage.  SIGTERM drains (flush, checkpoint, commit, leave the
# group) and exits 0: give it a stop grace period of a few seconds at least.
# `run` gets a static group member id from the hostname unless one is
# configured (deploy/entrypoint.sh says the rule).

FROM debian:12-slim AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config \
      librdkafka-dev libxxhash-dev libjansson-dev libmicrohttpd-dev \
      libjemalloc-dev libcrypt-dev libcurl4-openssl-dev libavro-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY filters filters
COPY formats formats
COPY config config
COPY stage stage
COPY cli cli
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBLOOMSTAGE_TESTS=OFF \
      -DBLOOMSTAGE_WERROR=ON \
 && cmake --build build -j"$(nproc)" --target bloomstage \
 && strip build/cli/bloomstage

FROM debian:12-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      librdkafka1 libxxhash0 libjansson4 libmicrohttpd12 libjemalloc2 \
      libcrypt1 libcurl4 libavro23 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /var/log/apt \
      /var/log/dpkg.log \
 && useradd --system --uid 10001 --home-dir /var/lib/bloomstage \
      --shell /usr/sbin/nologin bloomstage \
 && mkdir -p /var/lib/bloomstage /etc/bloomstage \
 && chown bloomstage:bloomstage /var/lib/bloomstage
COPY --from=build /src/build/cli/bloomstage /usr/local/bin/bloomstage
COPY config/bloomstage.conf config/spam-senders.txt /etc/bloomstage/
COPY deploy/entrypoint.sh /usr/local/bin/bloomstage-entrypoint

ENV BLOOMSTAGE_CHECKPOINT_DIR=/var/lib/bloomstage \
    BLOOMSTAGE_METRICS_LISTEN=0.0.0.0:9464
VOLUME /var/lib/bloomstage
EXPOSE 9464
USER bloomstage
WORKDIR /var/lib/bloomstage

# /healthz answers while the process runs; no curl in the image: bash's
# /dev/tcp speaks enough HTTP.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/9464 && printf 'GET /healthz HTTP/1.0\\r\\n\\r\\n' >&3 && head -n1 <&3 | grep -q ' 200 '"]

# Exec form, and the entrypoint execs: bloomstage is PID 1 and receives
# SIGTERM itself.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/bloomstage-entrypoint"]
CMD ["run", "-c", "/etc/bloomstage/bloomstage.conf"]
