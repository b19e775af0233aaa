# syntax=docker/dockerfile:1
# The bridge as a container: built by scripts/build-image.sh (which CI runs as well), run
# as distroless' non-root user with no shell or package manager in the image.
#   docker build --build-arg CYBEROS_BUILD_COMMIT=$(git rev-parse --short=12 HEAD) -t cyberos-mcp-bridge:0.1.0 .
# (.dockerignore keeps .git out of the context, so the commit comes from the build arg.)
# Base images are pinned by digest (the tag says what it is; the digest is what is pulled).
# These are the digests the tags were published with, as pinned by many public projects;
# they could not be checked against the registries where this file was written. Check or
# refresh them with `docker buildx imagetools inspect IMAGE:TAG` (or `crane digest`).
FROM docker.io/library/rust:1.94-bookworm@sha256:6ae102bdbf528294bc79ad6e1fae682f6f7c2a6e6621506ba959f9685b308a55 AS build
ARG CYBEROS_BUILD_COMMIT=
ENV CYBEROS_BUILD_COMMIT=${CYBEROS_BUILD_COMMIT}
WORKDIR /src
COPY . .
RUN scripts/build-image.sh /out

# glibc 2.36 like the bookworm build stage; user 65532 (nonroot).
FROM gcr.io/distroless/cc-debian12:nonroot@sha256:9dac0a79194e45a7da0158a9c6da57b217585af0786db3845d1f0ec1a0dd182f
COPY --from=build /out/ /
USER 65532:65532
ENV CYBEROS_DATA_DIR=/var/lib/cyberos-mcp-bridge
EXPOSE 8082
ENTRYPOINT ["/usr/local/bin/cyberos-mcp-bridge"]
CMD ["--transport", "http", "--listen", "0.0.0.0:8082"]
