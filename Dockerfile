# One image for every hookd role. Build: docker build -t hookd .
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p hookd

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --create-home --home-dir /var/lib/hookd hookd
COPY --from=build /src/target/release/hookd /usr/local/bin/hookd
USER hookd
WORKDIR /var/lib/hookd
# Inside a container the server must listen beyond loopback.
ENV HOOKD_BIND=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["hookd"]
CMD ["serve"]
