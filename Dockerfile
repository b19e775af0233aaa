# syntax=docker/dockerfile:1
# The bridge as a container: built by scripts/build-image.sh (which CI runs as well), run
# as distroless' non-root user with no shell or package manager in the image.
#   docker build --build-arg CYBEROS_BUILD_COMMIT=$(git rev-parse --short=12 HEAD) -t cyberos-mcp-bridge:0.1.0 .
FROM docker.io/library/rust:1.94-bookworm AS build
ARG CYBEROS_BUILD_COMMIT=
ENV CYBEROS_BUILD_COMMIT=${CYBEROS_BUILD_COMMIT}
WORKDIR /src
COPY . .
RUN scripts/build-image.sh /out

# glibc 2.36 like the bookworm build stage; user 65532 (nonroot).
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/ /
USER 65532:65532
ENV CYBEROS_DATA_DIR=/var/lib/cyberos-mcp-bridge
EXPOSE 8082
ENTRYPOINT ["/usr/local/bin/cyberos-mcp-bridge"]
CMD ["--transport", "http", "--listen", "0.0.0.0:8082"]
